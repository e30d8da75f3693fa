"""The documented bounds of what a trace file may hold, and how a bad value is shown.

Every loader checks these so that a file, however hostile, loads in time and memory linear in
its size or fails with one located line naming the limit (docs/traces.md, "Limits"). The
numbers are far above anything a recorded or synthetic workload needs; raise one here (and in
the docs) if a real trace ever meets it. Nothing here reads files.
"""

from __future__ import annotations

import re
import reprlib

__all__ = [
    "MAX_BLOCK_SIZE",
    "MAX_DAG_TOTAL_TOKENS",
    "MAX_ID_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_SECONDS",
    "MAX_TOKENS",
    "one_line",
    "shown",
]

# JSON nesting: our formats need about 10 levels (a Claude Code subagent adds two, a tool
# schema a few more). Deeper values are refused before they are parsed, so nothing recursive
# (the JSON decoder, pydantic, repr, json.dumps of a request body) ever meets them.
MAX_JSON_DEPTH = 64

# Session, agent and tree ids, in UTF-8 bytes: Dynamo refuses a longer X-Dynamo-Session-ID
# (HTTP 400), and every live session, request key and credit copies its id, so a megabyte id
# multiplied by lanes and turns would exhaust memory (a 1 MB id cost 593 MB in `simulate`).
MAX_ID_BYTES = 256

# Prompt or output tokens of one request: above every served context window (1-10 M).
MAX_TOKENS = 10_000_000

# Tokens per hash-id block (Claude Code traces use 64, Mooncake 512). The simulator expands
# each hash id into block_size / cluster block keys, so this also bounds that expansion.
MAX_BLOCK_SIZE = 4096

# Any time, offset, duration or delay of a trace, in seconds (about 31 years): keeps every
# clock finite and precise to well under a microsecond.
MAX_SECONDS = 1e9

# dag_jsonl turns carry only their new messages; the loader rebuilds each turn's whole context
# (earlier turns plus stand-in replies of max_tokens words). Summed over a file's turns, those
# contexts may hold at most this many tokens, so a few bytes of max_tokens cannot expand into
# unbounded work (a session's contexts grow quadratically with its turns).
MAX_DAG_TOTAL_TOKENS = 1 << 26  # 67,108,864


_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxstring = 40
_REPR.maxother = 40
_REPR.maxlong = 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4


def shown(value: object) -> str:
    """`value` quoted (repr) and shortened for a one-line error: long strings and numbers are
    cut in the middle, containers show their first items and two levels at most."""
    return _REPR.repr(value)


# Characters a terminal would break a line at, or that would garble it.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str, *, limit: int = 200) -> str:
    """`text` (a message that may embed a value) with control characters escaped and its
    middle cut past `limit` characters, so an error always prints as one short line."""
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
    if len(text) > limit:
        half = (limit - 3) // 2
        text = text[:half] + "..." + text[-half:]
    return text
