"""A tolerant reader of the Prometheus text exposition format (version 0.0.4).

Owns turning `/metrics` text into samples grouped by family: HELP and TYPE lines, label values
with escapes (`\\\\`, `\\"`, `\\n`), `NaN` / `+Inf` / `-Inf`, optional timestamps, and the
`_bucket` / `_sum` / `_count` (and `_total` / `_created`) series that belong to a declared
histogram, summary or counter. A malformed line is skipped and counted, never raised: a
server's odd exposition must not fail a run. It decides nothing about what the figures mean
(the catalogue does) and does no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["Exposition", "Family", "Sample", "parse_exposition"]

Labels = tuple[tuple[str, str], ...]

_NAME: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# One `name="value"` pair, then an optional comma; the value may hold escaped quotes.
_LABEL: Final = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_ESCAPES: Final = re.compile(r"\\(.)")
_SPECIAL: Final = {"nan": math.nan, "+inf": math.inf, "inf": math.inf, "-inf": -math.inf}
# Series a declared family owns beside its own name (histogram, summary, counter).
_SUFFIXES: Final = ("_bucket", "_sum", "_count", "_total", "_created")
_KINDS: Final = frozenset({"counter", "gauge", "histogram", "summary", "untyped", "info"})


@dataclass(frozen=True, slots=True)
class Sample:
    name: str  # the series name as written: `vllm:prefix_cache_hits_total`, `x_bucket`
    labels: Labels
    value: float
    timestamp_ms: int | None = None

    def label(self, name: str) -> str | None:
        for key, value in self.labels:
            if key == name:
                return value
        return None


@dataclass(slots=True)
class Family:
    name: str
    kind: str = "untyped"  # counter, gauge, histogram, summary, untyped
    help: str = ""
    samples: list[Sample] = field(default_factory=list)


@dataclass(slots=True)
class Exposition:
    families: dict[str, Family]
    skipped_lines: int  # lines that were neither a comment nor a readable sample

    def series(self, name: str) -> list[Sample]:
        """Every sample named `name` (a series name, e.g. `x_total`, not the family's)."""
        family = self.families.get(name) or self.families.get(_stem(name))
        if family is None:
            return []
        return [s for s in family.samples if s.name == name]

    @property
    def sample_count(self) -> int:
        return sum(len(f.samples) for f in self.families.values())


def parse_exposition(text: str) -> Exposition:
    families: dict[str, Family] = {}
    declared: dict[str, str] = {}  # family name -> kind, from TYPE lines
    skipped = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line[0] == "#":
            _comment(line, families, declared)
            continue
        sample = _sample(line)
        if sample is None:
            skipped += 1
            continue
        name = _family_of(sample.name, declared)
        family = families.get(name)
        if family is None:
            family = families[name] = Family(name, declared.get(name, "untyped"))
        family.samples.append(sample)
    return Exposition(families, skipped)


def _comment(line: str, families: dict[str, Family], declared: dict[str, str]) -> None:
    parts = line[1:].strip().split(None, 2)
    if len(parts) < 2 or parts[0] not in ("HELP", "TYPE") or not _NAME.fullmatch(parts[1]):
        return  # a plain comment (or `# EOF`)
    name = parts[1]
    rest = parts[2].strip() if len(parts) > 2 else ""
    family = families.get(name)
    if family is None:
        family = families[name] = Family(name)
    if parts[0] == "TYPE":
        kind = rest.lower()
        family.kind = kind if kind in _KINDS else "untyped"
        declared[name] = family.kind
    else:
        family.help = _unescape(rest) if "\\" in rest else rest


def _family_of(series: str, declared: dict[str, str]) -> str:
    if series in declared:
        return series
    stem = _stem(series)
    return stem if stem in declared else series


def _stem(series: str) -> str:
    for suffix in _SUFFIXES:
        if series.endswith(suffix):
            return series[: -len(suffix)]
    return series


def _sample(line: str) -> Sample | None:
    match = _NAME.match(line)
    if match is None:
        return None
    name = match.group()
    pos = match.end()
    labels: Labels = ()
    if pos < len(line) and line[pos] == "{":
        parsed = _labels(line, pos + 1)
        if parsed is None:
            return None
        labels, pos = parsed
    rest = line[pos:].split()
    if not rest or (pos < len(line) and not line[pos].isspace()):
        return None
    value = _number(rest[0])
    if value is None:
        return None
    timestamp = None
    if len(rest) > 1 and rest[1] != "#":  # `#` starts an OpenMetrics exemplar: ignored
        try:
            timestamp = int(rest[1])
        except ValueError:
            return None
    return Sample(name, labels, value, timestamp)


def _labels(line: str, pos: int) -> tuple[Labels, int] | None:
    pairs: list[tuple[str, str]] = []
    while True:
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos < len(line) and line[pos] == "}":
            return tuple(pairs), pos + 1
        match = _LABEL.match(line, pos)
        if match is None:
            return None
        value = match.group(2)
        pairs.append((match.group(1), _unescape(value) if "\\" in value else value))
        pos = match.end()


def _unescape(text: str) -> str:
    return _ESCAPES.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def _number(text: str) -> float | None:
    special = _SPECIAL.get(text.lower())
    if special is not None:
        return special
    try:
        return float(text)
    except ValueError:
        return None
