"""Importer for the Azure LLM inference CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`).

Owns turning each row into one single-turn tree placed at its arrival: `t_s` is the row's
wall-clock time minus the earliest row's (the first row of a sorted file), and turn 0's delay
is that same offset, since every tree starts at the trace start. The file carries no
sessions and no prefix information, so there are no hash ids; durations are nominal.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime
from typing import Any

from runner.errors import TraceError
from runner.trace.build import Warnings, content_scope
from runner.trace.limits import MAX_SECONDS, MAX_TOKENS, shown
from runner.trace.model import Session, Trace, TraceFormat, Tree, Turn
from runner.trace.timing import nominal_duration_s

__all__ = ["AZURE_COLUMNS", "load_azure_csv"]

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")

# The csv module refuses fields longer than this (its default); no valid field comes close.
_FIELD_LIMIT = csv.field_size_limit()
# The Azure form, date and time to the second (Python's fromisoformat alone would take
# "1111...1" for 1111-11-11 11:11:11), then up to 9 decimals.
_SECONDS = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}")
_FRACTION = re.compile(r"[0-9]{1,9}")
_COUNT = re.compile(r"[0-9]{1,9}")  # a token count: plain decimal digits, at most 9 of them


class _TimeParser:
    """Seconds since the epoch of '2023-11-16 18:15:46.6805900' (up to 9 decimals).

    Rows arrive in time order, many within one second: the whole-second part is parsed once
    per run of equal prefixes.
    """

    def __init__(self) -> None:
        self._whole = ""
        self._base = 0.0

    def __call__(self, value: str) -> float:
        whole, dot, frac = value.strip().partition(".")
        if not _SECONDS.fullmatch(whole) or (dot and not _FRACTION.fullmatch(frac)):
            raise ValueError(value)  # `46.5e400` would read as infinity
        if whole != self._whole:
            # Only differences matter; reading as UTC keeps them free of DST jumps.
            self._base = datetime.fromisoformat(whole).replace(tzinfo=UTC).timestamp()
            self._whole = whole
        return self._base + (int(frac) / 10 ** len(frac) if frac else 0.0)


def _parse_count(value: str) -> int:
    value = value.strip()
    if not _COUNT.fullmatch(value):
        raise ValueError(value)
    return int(value)


def load_azure_csv(text: str, *, source: str) -> Trace:
    # newline="" lets csv see the file's own line ends; line_num then counts the file's lines.
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        return _load_rows(reader, source=source, text=text)
    except csv.Error as exc:
        raise TraceError(
            f"bad CSV: {shown(str(exc))}",
            source=source,
            line=reader.line_num,
            fix=f"fields are at most {_FIELD_LIMIT:,} characters, without NUL bytes",
        ) from None


def _load_rows(reader: Any, *, source: str, text: str) -> Trace:
    header = next(reader, None)
    if header is None:
        raise TraceError("the file is empty", source=source, line=1)
    names = [h.strip() for h in header]
    missing = [c for c in AZURE_COLUMNS if c.lower() not in [n.lower() for n in names]]
    if missing:
        raise TraceError(
            f"missing column {missing[0]!r} in the header",
            source=source,
            line=1,
            fix="the header must be TIMESTAMP,ContextTokens,GeneratedTokens",
        )
    lowered = [n.lower() for n in names]
    for i, name in enumerate(lowered):
        if name in lowered[:i]:
            raise TraceError(
                f"column {shown(names[i])} appears twice in the header",
                source=source,
                line=1,
                path=names[i] if names[i] else None,
                fix="name each column once: which copy holds the values is ambiguous",
            )
    col = {c: lowered.index(c.lower()) for c in AZURE_COLUMNS}
    warnings = Warnings()
    parse_time = _TimeParser()
    rows: list[tuple[int, float, int, int]] = []
    end = reader.line_num
    for record in reader:
        # A record starts on the line after the previous one ended (a quoted line break would
        # make it span more); errors name that first line.
        line, end = end + 1, reader.line_num
        if not record or not "".join(record).strip():
            continue
        for i, value in enumerate(record):
            if "\n" in value or "\r" in value:
                raise TraceError(
                    f"a quoted field holds a line break: {shown(value)}",
                    source=source,
                    line=line,
                    path=names[i] if i < len(names) and names[i] else None,
                    fix="one request per line: remove the line break inside the quotes",
                )
        if len(record) > len(names):
            raise TraceError(
                f"expected {len(names)} columns, found {len(record)}: "
                f"extra field {shown(record[len(names)])}",
                source=source,
                line=line,
                fix="every row holds exactly the header's columns; quote a value holding a comma",
            )
        if len(record) < len(names):
            raise TraceError(
                f"expected {len(names)} columns, found {len(record)}"
                + (" (is the file truncated?)" if line > 2 else ""),
                source=source,
                line=line,
                fix="every row needs TIMESTAMP,ContextTokens,GeneratedTokens",
            )
        field = "TIMESTAMP"
        try:
            t = parse_time(record[col["TIMESTAMP"]])
            field = "ContextTokens"
            context = _parse_count(record[col["ContextTokens"]])
            field = "GeneratedTokens"
            generated = _parse_count(record[col["GeneratedTokens"]])
        except (ValueError, OverflowError):
            raise TraceError(
                f"bad {field} value {shown(record[col[field]])}",
                source=source,
                line=line,
                path=field,
                fix="TIMESTAMP like 2023-11-16 18:15:46.68; token counts as whole numbers",
            ) from None
        if not 1 <= context <= MAX_TOKENS or generated > MAX_TOKENS:
            bad, need = (
                ("ContextTokens", f"1..{MAX_TOKENS:,}")
                if not 1 <= context <= MAX_TOKENS
                else ("GeneratedTokens", f"0..{MAX_TOKENS:,}")
            )
            raise TraceError(
                f"{bad} must be {need} (the limit), got {shown(record[col[bad]])}",
                source=source,
                line=line,
                path=bad,
            )
        if generated == 0:
            warnings.add(f"line {line}: GeneratedTokens 0, replayed as 1")
            generated = 1
        rows.append((line, t, context, generated))
    if not rows:
        raise TraceError("the file holds no requests", source=source, line=2)
    origin = min(t for _, t, _, _ in rows)
    last_line, last = max(((line, t) for line, t, _, _ in rows), key=lambda lt: lt[1])
    if last - origin > MAX_SECONDS:
        raise TraceError(
            f"the rows span {last - origin:.3g} s, over the {MAX_SECONDS:.0e} s limit",
            source=source,
            line=last_line,
            path="TIMESTAMP",
            fix="check the timestamps: a trace spans hours or days",
        )
    trees: list[Tree] = []
    for line, t, context, generated in rows:
        sid = f"azure-{line}"
        t_s = round(t - origin, 6)
        turn = Turn(
            index=0,
            input_tokens=context,
            output_tokens=generated,
            delay_s=t_s,
            t_s=t_s,
            duration_s=nominal_duration_s(context, generated),
        )
        trees.append(
            Tree(
                id=sid,
                root_id=sid,
                sessions={sid: Session(id=sid, turns=(turn,))},
                timestamped=True,
            )
        )
    return Trace(
        format=TraceFormat.AZURE_CSV,
        source=source,
        trees=tuple(trees),
        meta={"hash_scope": content_scope(text), **warnings.meta()},
    )
