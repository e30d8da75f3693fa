"""JSON text into Python values under the trace limits, with located one-line errors.

Owns every `json.loads` of a trace: nesting is measured on the text (C-speed string
operations) and refused past MAX_JSON_DEPTH before the recursive decoder runs; `NaN`,
`Infinity` and numbers that overflow a float are refused (they are not JSON, and `inf` would
reach every clock); strings holding a lone UTF-16 surrogate (`"\\ud800"`, not Unicode, so
never encodable) are refused; so is an object holding one key twice (the decoder would keep
the last silently, while other readers keep the first). It knows no format's keys.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
from collections.abc import Iterator
from typing import Any

from runner.errors import TraceError
from runner.trace.limits import MAX_JSON_DEPTH, shown

__all__ = ["iter_json_lines", "json_too_deep", "parse_json"]

# Outside strings only brackets count: every other byte but quotes is deleted, openers become
# "(" and closers ")"; the locating variant keeps newlines to count lines.
_OPEN_CLOSE = bytes.maketrans(b"[{]}", b"(())")
_DELETE = bytes(c for c in range(256) if c not in b'[]{}"')
_DELETE_KEEP_NEWLINES = bytes(c for c in range(256) if c not in b'[]{}"\n')
# Object ends and line breaks only, to find the line where the n-th object closes.
_DELETE_BUT_OBJECT_ENDS = bytes(c for c in range(256) if c not in b'}"\n')
# A \u escape of a UTF-16 surrogate (high or low); whether it is paired is judged after parsing.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class _NotFinite(ValueError):
    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


def _reject_constant(literal: str) -> float:
    raise _NotFinite(literal)


def _finite_float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise _NotFinite(literal)
    return value


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's dict, refusing a repeated key. One C-built dict per object: the check costs
    a length comparison, and the repeated key is looked for only when there is one."""
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def _skeleton(
    text: str, *, newlines: bool = False, table: bytes | None = _OPEN_CLOSE, delete: bytes = b""
) -> bytes:
    """The brackets of `text` outside JSON strings, as b"(" and b")" (and b"\\n" if asked).

    Escaped backslashes, then escaped quotes, are blanked; everything but brackets and quotes
    is deleted; then every two adjacent quotes go (that keeps the parity of the quotes before
    every bracket, so inside stays inside). Quotes left enclose brackets inside strings, and
    only those few are split out. All C-speed byte operations: a Python step per character,
    or per string of a large hostile file, would cost seconds.
    """
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        data = data.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    skeleton = data.translate(table, delete or (_DELETE_KEEP_NEWLINES if newlines else _DELETE))
    if b'"' in skeleton:
        skeleton = skeleton.replace(b'""', b"")
        if b'"' in skeleton:
            skeleton = b"".join(skeleton.split(b'"')[::2])
    return skeleton


# One decoder for every document: json.loads with hooks builds a new decoder and scanner per
# call, which costs more than decoding a short line.
_DECODER = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
)


def _duplicate_line(text: str) -> int | None:
    """The line (1-based) where the first object holding a repeated key closes (failure path
    only, one more decode at C speed). The decoder completes objects in the order their
    closing braces appear, so counting the objects completed before the refusal names its
    brace among those outside strings."""
    completed = 0

    def counting(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal completed
        obj = _unique_keys(pairs)
        completed += 1
        return obj

    decoder = json.JSONDecoder(
        parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=counting
    )
    with contextlib.suppress(_DuplicateKey):
        decoder.decode(text)
    ends = _skeleton(text, table=None, delete=_DELETE_BUT_OBJECT_ENDS)
    before = ends.split(b"}", completed + 1)
    if len(before) <= completed + 1:
        return None
    return ends.count(b"\n", 0, len(ends) - len(before[-1])) + 1


def json_too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text nests arrays and objects more than `limit` levels deep.

    Each round removes every innermost `()` pair of the bracket skeleton, which lowers its
    depth by exactly one; a run of openers longer than the rounds left settles it at once (the
    usual shape of a hostile file). Only approximate for invalid JSON (an unbalanced quote).
    """
    skeleton = _skeleton(text)
    rounds = 0
    while skeleton:
        if b"(" * (limit - rounds + 1) in skeleton:
            return True
        reduced = skeleton.replace(b"()", b"")
        if len(reduced) == len(skeleton):
            return False  # unbalanced leftovers (a cut-off file): the decoder will say where
        rounds += 1
        if rounds > limit:
            return True
        skeleton = reduced
    return False


def _deep_line(text: str, limit: int) -> int | None:
    """The line (1-based) where nesting first passes `limit`, None if it never does (the
    quick check was fooled by invalid JSON). One Python step per bracket: failure path only."""
    depth = 0
    line = 1
    for byte in _skeleton(text, newlines=True):
        if byte == 40:  # (
            depth += 1
            if depth > limit:
                return line
        elif byte == 41:  # )
            depth -= 1
        else:
            line += 1
    return None


def _depth_error(source: str, line: int | None) -> TraceError:
    return TraceError(
        f"JSON nested more than {MAX_JSON_DEPTH} levels deep (the limit)",
        source=source,
        line=line,
        fix="flatten the value; trace records need about 10 levels",
    )


def parse_json(
    text: str,
    *,
    source: str,
    line: int | None = None,
    check_depth: bool = True,
    may_be_cut: bool = True,
) -> Any:
    """One JSON document (a whole file, or one line of a JSON-lines file when `line` is given).

    Raises TraceError for invalid JSON (an early end is called a truncation when `may_be_cut`),
    nesting past MAX_JSON_DEPTH, NaN / Infinity / overflowing numbers, lone surrogates and
    repeated keys.
    """
    if check_depth and json_too_deep(text):
        deep_line = line if line is not None else _deep_line(text, MAX_JSON_DEPTH)
        if deep_line is not None:
            raise _depth_error(source, deep_line)
    try:
        value = _DECODER.decode(text)
    except _DuplicateKey as exc:
        raise TraceError(
            f"the key {shown(exc.key)} appears twice in one object"
            + ("" if line is not None else " (the one that closes on this line)"),
            source=source,
            line=line if line is not None else _duplicate_line(text),
            fix="give each key once: JSON readers disagree on which copy wins",
        ) from None
    except _NotFinite as exc:
        if line is None:  # a whole document: the line of the first such literal
            at = text.find(exc.literal)
            line = text.count("\n", 0, at) + 1 if at >= 0 else None
        raise TraceError(
            f"the number {shown(exc.literal)} is not finite",
            source=source,
            line=line,
            fix="JSON numbers must be finite: no NaN, Infinity or 1e400",
        ) from None
    except json.JSONDecodeError as exc:
        cut = may_be_cut and exc.pos >= len(text.rstrip()) - 1
        unit = "line" if line is not None else "document"
        raise TraceError(
            f"not valid JSON: {exc.msg} at column {exc.colno}"
            + (f" (the {unit} ends early: is the file truncated?)" if cut else ""),
            source=source,
            line=line if line is not None else exc.lineno,
            fix="each line must be one complete JSON object"
            if line is not None
            else "the file must be one complete JSON object",
        ) from None
    except RecursionError:  # only if the quick depth check was skipped or fooled
        raise _depth_error(source, line) from None
    except ValueError as exc:  # Python refuses integers of more than 4300 digits
        digits = sys.get_int_max_str_digits()
        problem = (
            f"a number has more than {digits:,} digits"
            if "digits" in str(exc)
            else f"not valid JSON: {shown(str(exc))}"
        )
        raise TraceError(
            problem, source=source, line=line, fix="numbers must fit the trace limits"
        ) from None
    if _SURROGATE_ESCAPE.search(text):
        _check_surrogates(value, text, source=source, line=line)
    return value


def _check_surrogates(value: Any, text: str, *, source: str, line: int | None) -> None:
    """Refuse a lone surrogate: it is not Unicode, so no request could ever carry it."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        escape = f"\\u{ord(bad[0]):04x}"
        at = text.lower().find(escape)
        if line is None and at >= 0:
            line = text.count("\n", 0, at) + 1
        raise TraceError(
            f"a string holds a lone UTF-16 surrogate {escape} (not valid Unicode)",
            source=source,
            line=line,
            fix="escape a character as a surrogate pair, or remove it",
        ) from None


def iter_json_lines(text: str, *, source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of a JSON-lines text."""
    lines = text.split("\n")
    # One depth check over the whole text (the common case passes at C speed); only a file
    # that fails is checked line by line, to name the line.
    deep = json_too_deep(text)
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        if deep and json_too_deep(raw):
            raise _depth_error(source, i + 1)
        # Only the last line of a file without a final newline can have been cut off.
        cut = i == last and not text.endswith("\n")
        obj = parse_json(raw, source=source, line=i + 1, check_depth=False, may_be_cut=cut)
        if not isinstance(obj, dict):
            raise TraceError(
                f"expected a JSON object, got {type(obj).__name__}",
                source=source,
                line=i + 1,
                fix="each line must be one JSON object",
            )
        yield i + 1, obj
