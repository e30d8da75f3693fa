"""Importer for the Azure LLM inference CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`).

Owns turning each row into one single-turn tree placed at its arrival: `t_s` is the row's
wall-clock time minus the earliest row's (the first row of a sorted file), and turn 0's delay
is that same offset, since every tree starts at the trace start. The file carries no
sessions and no prefix information, so there are no hash ids; durations are nominal.
"""

from __future__ import annotations

import csv
from datetime import UTC, datetime

from runner.errors import TraceError
from runner.trace.build import Warnings, content_scope
from runner.trace.model import Session, Trace, TraceFormat, Tree, Turn
from runner.trace.timing import nominal_duration_s

__all__ = ["AZURE_COLUMNS", "load_azure_csv"]

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def _parse_time(value: str) -> float:
    """Seconds since the epoch of '2023-11-16 18:15:46.6805900' (any number of decimals)."""
    whole, _, frac = value.strip().partition(".")
    # Only differences matter; reading as UTC keeps them free of DST jumps.
    base = datetime.fromisoformat(whole).replace(tzinfo=UTC)
    return base.timestamp() + (float(f"0.{frac}") if frac else 0.0)


def load_azure_csv(text: str, *, source: str) -> Trace:
    reader = csv.reader(text.splitlines())
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
    col = {c: lowered.index(c.lower()) for c in AZURE_COLUMNS}
    warnings = Warnings()
    rows: list[tuple[int, float, int, int]] = []
    for line, record in enumerate(reader, start=2):
        if not record or not any(cell.strip() for cell in record):
            continue
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
            t = _parse_time(record[col["TIMESTAMP"]])
            field = "ContextTokens"
            context = int(record[col["ContextTokens"]])
            field = "GeneratedTokens"
            generated = int(record[col["GeneratedTokens"]])
        except ValueError:
            raise TraceError(
                f"bad {field} value {record[col[field]]!r}",
                source=source,
                line=line,
                path=field,
                fix="TIMESTAMP like 2023-11-16 18:15:46.68; token counts as integers",
            ) from None
        if context < 1 or generated < 0:
            bad, need = (
                ("ContextTokens", "at least 1") if context < 1 else ("GeneratedTokens", ">= 0")
            )
            raise TraceError(
                f"{bad} must be {need}, got {record[col[bad]]}",
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
