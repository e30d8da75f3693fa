"""Recompute a run's summary from its stored records and say how far each figure is off.

A summary's percentiles come from mergeable log-bucketed histograms (histogram.py: within
0.54 % of the exact order statistic); its counts, token sums and hit ratios are exact. This
module reads the records one at a time (a JSON line or a row each, never all of them as
objects), keeps only what exact percentiles need (one float per request and metric, in
compact arrays: 8 bytes a value, 25 MB for a million requests' three metrics), and compares:
counts and sums must be equal, ratios equal to rounding, percentiles within the histogram's
stated error (`HISTOGRAM_RELATIVE_ERROR`; min and max are exact). Pure: fed dicts, returns a
report, does no I/O. `verify_checked` is what every face of verify answers (`python -m runner
verify`, `manage.py verify_run`, the service's `GET /api/v1/runs/<id>/verify`), and
`verify_text` prints that answer the one way (the service CLI prints the API's with it).
"""

from __future__ import annotations

import json
import math
import time
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from runner.metrics.gaps import decode_gaps, gaps_from_text
from runner.metrics.records import CUT_BY_STOP

__all__ = [
    "HISTOGRAM_RELATIVE_ERROR",
    "Difference",
    "RecordTally",
    "VerifyReport",
    "verify",
    "verify_checked",
    "verify_text",
]

# (γ - 1)/(γ + 1) with γ = 2^(1/64): histogram.py's bound on any estimate's relative error.
HISTOGRAM_RELATIVE_ERROR: Final = (2 ** (1 / 64) - 1) / (2 ** (1 / 64) + 1)
# Ratios and means are printed rounded (4 decimals for ratios in some summaries): this much
# difference is rounding, not a discrepancy.
_RATIO_TOLERANCE: Final = 5e-5
_MEAN_RELATIVE_TOLERANCE: Final = 1e-6
# Values at or below this share the histogram's zero bucket (histogram.ZERO_FLOOR_MS).
_ZERO_FLOOR_MS: Final = 2.0**-10
PERCENTILES: Final = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0))
LATENCIES: Final = ("ttft_ms", "itl_ms", "latency_ms")
# The summary's percentiles over every inter-chunk gap (output.summary_figures), rounded to
# 3 decimals: half a unit of that (0.5 us) is export precision, allowed beside the
# histogram's error.
INTER_CHUNK: Final = "inter_chunk_ms"
_EXPORT_HALF_UNIT_MS: Final = 0.0005
# A record's itl_ms is its chunks' span over their count; its gaps are rounded to the
# microsecond, so their mean may differ by up to 1 us (more only if the record is wrong).
_ITL_MEAN_TOLERANCE_MS: Final = 0.001


def _percentile_of_counts(keys: list[int], counts: Counter[int], total: int, q: float) -> float:
    """`_exact_percentile` over the multiset {key: count} (sorted `keys`), in the keys' unit."""
    h = (total - 1) * q / 100.0
    below = math.floor(h)
    above = math.ceil(h)
    low = high = None
    seen = 0
    for key in keys:
        seen += counts[key]
        if low is None and seen > below:
            low = key
        if seen > above:
            high = key
            break
    assert low is not None and high is not None
    return low + (h - below) * (high - low)


def _exact_percentile(values: array[float], q: float) -> float | None:
    """numpy's default ("linear") percentile of sorted `values`, as histogram.py defines it."""
    n = len(values)
    if not n:
        return None
    h = (n - 1) * q / 100.0
    below = math.floor(h)
    value = values[below]
    fraction = h - below
    if fraction:
        value += fraction * (values[math.ceil(h)] - value)
    return value


@dataclass(slots=True)
class RecordTally:
    """What the records add up to, fed one record (a dict) at a time."""

    requests: int = 0
    warmup_requests: int = 0
    completed: int = 0
    cut_by_stop: int = 0
    errors_by_category: dict[str, int] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_reported_prompt_tokens: int = 0
    child_first_prompt_tokens: int = 0
    child_first_cached_tokens: int = 0
    values: dict[str, array[float]] = field(
        default_factory=lambda: {name: array("d") for name in LATENCIES}
    )
    # Every inter-chunk gap, as {microseconds: how many}: exact percentiles need the whole
    # multiset, and gaps are whole microseconds, so memory grows with the distinct values
    # (a few thousand to a few hundred thousand), not with the samples (Counter.update
    # counts a record's array in C).
    gap_counts: Counter[int] = field(default_factory=Counter)
    gap_samples: int = 0
    records_with_gaps: int = 0
    records_without_gaps: int = 0  # successful, with an ITL, but no gaps kept (older records)
    itl_mean_mismatches: int = 0  # records whose itl_ms is not their gaps' mean

    def _add_gaps(self, record: Mapping[str, Any]) -> None:
        data = record.get("chunk_gaps")
        if data is None and record.get("chunk_gaps_us") is not None:
            data = gaps_from_text(record["chunk_gaps_us"])
        if data is None:
            if record.get("itl_ms") is not None:
                self.records_without_gaps += 1
            return
        gaps = decode_gaps(bytes(data))
        if not gaps:
            return
        self.records_with_gaps += 1
        self.gap_samples += len(gaps)
        self.gap_counts.update(gaps)
        itl = record.get("itl_ms")
        if itl is None or abs(sum(gaps) / len(gaps) / 1000.0 - float(itl)) > (
            _ITL_MEAN_TOLERANCE_MS + 1e-9 * abs(float(itl))
        ):
            self.itl_mean_mismatches += 1

    def add(self, record: Mapping[str, Any]) -> None:
        if record.get("warmup"):
            self.warmup_requests += 1
            return
        self.requests += 1
        error = record.get("error")
        if error is not None:
            if error == CUT_BY_STOP:
                self.cut_by_stop += 1
            else:
                self.errors_by_category[error] = self.errors_by_category.get(error, 0) + 1
            return
        self.completed += 1
        prompt = int(record["prompt_tokens"])
        self.input_tokens += prompt
        self.output_tokens += int(record["output_tokens"])
        cached = record.get("cached_tokens")
        if cached is not None:
            self.cached_tokens += int(cached)
            self.cache_reported_prompt_tokens += prompt
            if record.get("turn_index") == 0 and int(record.get("depth") or 0) > 0:
                self.child_first_prompt_tokens += prompt
                self.child_first_cached_tokens += int(cached)
        ttft = record.get("ttft_ms")
        if ttft is None and record.get("first_token_s") is not None:
            ttft = (record["first_token_s"] - record["start_s"]) * 1000.0
        if ttft is not None:
            self.values["ttft_ms"].append(float(ttft))
        if record.get("itl_ms") is not None:
            self.values["itl_ms"].append(float(record["itl_ms"]))
        self._add_gaps(record)
        latency = record.get("latency_ms")
        if latency is None:
            latency = (record["end_s"] - record["start_s"]) * 1000.0
        self.values["latency_ms"].append(float(latency))

    @property
    def errors(self) -> int:
        return sum(self.errors_by_category.values())

    def figures(self) -> dict[str, Any]:
        """The summary's figures recomputed exactly (percentiles from the sorted values)."""
        out: dict[str, Any] = {
            "requests": self.requests,
            "warmup_requests": self.warmup_requests,
            "errors": self.errors,
            "cut_by_stop": self.cut_by_stop,
            "errors_by_category": dict(sorted(self.errors_by_category.items())),
            "prefix_cache_hit_ratio": _ratio(self.cached_tokens, self.cache_reported_prompt_tokens),
            "child_first_turn_hit_ratio": _ratio(
                self.child_first_cached_tokens, self.child_first_prompt_tokens
            ),
        }
        for name in LATENCIES:
            values = array("d", sorted(self.values[name]))
            n = len(values)
            group: dict[str, float | None] = {
                key: _exact_percentile(values, q) for key, q in PERCENTILES
            }
            group["min"] = values[0] if n else None
            group["max"] = values[-1] if n else None
            group["mean"] = math.fsum(values) / n if n else None
            out[name] = group
            out[name + "_count"] = n
        out[INTER_CHUNK] = self.inter_chunk_figures()
        out["inter_chunk_samples"] = self.gap_samples
        return out

    def inter_chunk_figures(self) -> dict[str, float | None]:
        """Exact percentiles (ms) of every inter-chunk gap the records keep."""
        total = self.gap_samples
        if not total:
            empty: dict[str, float | None] = {key: None for key, _ in PERCENTILES}
            return empty | {"min": None, "max": None}
        keys = sorted(self.gap_counts)
        group: dict[str, float | None] = {
            key: _percentile_of_counts(keys, self.gap_counts, total, q) / 1000.0
            for key, q in PERCENTILES
        }
        group["min"] = keys[0] / 1000.0
        group["max"] = keys[-1] / 1000.0
        return group


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


@dataclass(frozen=True, slots=True)
class Difference:
    figure: str  # e.g. "ttft_ms.p99", "requests"
    summary: Any  # what the summary says
    records: Any  # what the records give
    difference: float | None  # absolute, or relative for percentiles and means
    allowed: float  # the stated error (0 for counts)
    relative: bool

    @property
    def ok(self) -> bool:
        return self.difference is not None and self.difference <= self.allowed

    def to_json(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "summary": self.summary,
            "records": self.records,
            # A mismatch that is no number apart (a dict of categories) is infinitely far:
            # JSON has no infinity, so null (and ok false).
            "difference": (
                self.difference
                if self.difference is None or math.isfinite(self.difference)
                else None
            ),
            "allowed": self.allowed,
            "relative": self.relative,
            "ok": self.ok,
        }


@dataclass(frozen=True, slots=True)
class VerifyReport:
    records: int  # lines read (warmup included)
    differences: tuple[Difference, ...]
    # Figures the records could not check, with why ({"figure", "reason"}): never a pass.
    unchecked: tuple[dict[str, str], ...] = ()
    inter_chunk: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(d.ok for d in self.differences)

    @property
    def failures(self) -> list[Difference]:
        return [d for d in self.differences if not d.ok]

    def largest(self, prefix: str) -> float | None:
        """The largest difference among figures named `prefix...` (e.g. "ttft_ms.")."""
        found = [
            d.difference
            for d in self.differences
            if d.figure.startswith(prefix) and d.difference is not None
        ]
        return max(found) if found else None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "records": self.records,
            "histogram_relative_error": HISTOGRAM_RELATIVE_ERROR,
            "largest_relative_difference": {name: self.largest(name + ".") for name in LATENCIES},
            "largest_percentile_difference": {
                name: self.largest(name + ".p") for name in (*LATENCIES, INTER_CHUNK)
            },
            "unchecked": list(self.unchecked),
            "inter_chunk": dict(self.inter_chunk),
            "failures": [d.to_json() for d in self.failures],
            "figures": [d.to_json() for d in self.differences],
        }


def verify(summary: Mapping[str, Any], records: Iterable[Mapping[str, Any]]) -> VerifyReport:
    """Every figure of `summary` the records determine, recomputed and compared."""
    tally = RecordTally()
    count = 0
    for record in records:
        tally.add(record)
        count += 1
    exact = tally.figures()
    out: list[Difference] = []

    def equal(name: str, said: Any, found: Any) -> None:
        diff = 0.0 if said == found else math.inf
        if isinstance(said, int | float) and isinstance(found, int | float):
            diff = abs(float(said) - float(found))
        out.append(Difference(name, said, found, diff, 0.0, relative=False))

    for name in ("requests", "warmup_requests", "errors", "cut_by_stop"):
        if name in summary:
            equal(name, summary[name], exact[name])
    if "errors_by_category" in summary:
        said = {k: n for k, n in summary["errors_by_category"].items() if n}
        equal("errors_by_category", dict(sorted(said.items())), exact["errors_by_category"])
    for name in ("prefix_cache_hit_ratio", "child_first_turn_hit_ratio"):
        if name not in summary:
            continue
        said, found = summary[name], exact[name]
        if said is None or found is None:
            out.append(Difference(name, said, found, 0.0 if said == found else None, 0.0, False))
        else:
            out.append(Difference(name, said, found, abs(said - found), _RATIO_TOLERANCE, False))
    for metric in LATENCIES:
        stated = summary.get(metric)
        if not isinstance(stated, Mapping):
            continue
        found_group = exact[metric]
        for key in ("p50", "p90", "p95", "p99", "min", "max", "mean"):
            if key not in stated:
                continue
            said, found = stated[key], found_group[key]
            allowed = (
                HISTOGRAM_RELATIVE_ERROR
                if key.startswith("p")
                else (_MEAN_RELATIVE_TOLERANCE if key == "mean" else 1e-9)
            )
            out.append(_relative(f"{metric}.{key}", said, found, allowed))
    unchecked = _inter_chunk(summary, tally, exact, out)
    inter_chunk = {
        "samples": tally.gap_samples,
        "records_with_gaps": tally.records_with_gaps,
        "records_without_gaps": tally.records_without_gaps,
        "distinct_values": len(tally.gap_counts),
        "itl_mean_mismatches": tally.itl_mean_mismatches,
        "percentiles_ms": exact[INTER_CHUNK],
    }
    return VerifyReport(count, tuple(out), tuple(unchecked), inter_chunk)


def _inter_chunk(
    summary: Mapping[str, Any],
    tally: RecordTally,
    exact: Mapping[str, Any],
    out: list[Difference],
) -> list[dict[str, str]]:
    """The inter-chunk figures: each record's itl_ms against its gaps' mean, the sample count,
    and the summary's percentiles against the exact ones from every stored gap. Records
    without gaps (written before they were kept) make the percentiles uncheckable: said so,
    never passed."""
    unchecked: list[dict[str, str]] = []
    if tally.records_with_gaps:
        out.append(
            Difference(
                "records.itl_ms_is_gap_mean_mismatches",
                0,
                tally.itl_mean_mismatches,
                float(tally.itl_mean_mismatches),
                0.0,
                relative=False,
            )
        )
    stated = summary.get(INTER_CHUNK)
    if summary.get("inter_chunk_samples") == 0 and not tally.gap_samples:
        # A run that timed no chunks (the simulator): nothing to recompute, and nothing lost.
        out.append(Difference("inter_chunk_samples", 0, 0, 0.0, 0.0, relative=False))
        return unchecked
    if tally.records_without_gaps:
        unchecked.append(
            {
                "figure": INTER_CHUNK,
                "reason": f"{tally.records_without_gaps:,} records with an ITL carry no "
                "inter-chunk gaps (written before gaps were kept): the inter-chunk "
                "percentiles could not be checked",
            }
        )
        return unchecked
    if not isinstance(stated, Mapping):
        if tally.gap_samples:
            unchecked.append(
                {
                    "figure": INTER_CHUNK,
                    "reason": "the summary states no inter-chunk percentiles (a run before "
                    "they were kept); the records' are reported alone",
                }
            )
        return unchecked
    if "inter_chunk_samples" in summary:
        said = summary["inter_chunk_samples"]
        found = exact["inter_chunk_samples"]
        out.append(Difference("inter_chunk_samples", said, found, abs(said - found), 0.0, False))
    found_group = exact[INTER_CHUNK]
    for key in ("p50", "p90", "p95", "p99", "min", "max"):
        if key not in stated:
            continue
        said, found = stated[key], found_group[key]
        scale = max(abs(found or 0.0), _ZERO_FLOOR_MS)
        allowed = HISTOGRAM_RELATIVE_ERROR + _EXPORT_HALF_UNIT_MS / scale
        out.append(_relative(f"{INTER_CHUNK}.{key}", said, found, allowed))
    return unchecked


def _relative(name: str, said: Any, found: Any, allowed: float) -> Difference:
    if said is None or found is None:
        same = said is None and found is None
        return Difference(name, said, found, 0.0 if same else None, allowed, relative=True)
    said, found = float(said), float(found)
    if abs(found) <= _ZERO_FLOOR_MS and abs(said) <= _ZERO_FLOOR_MS:
        return Difference(name, said, found, 0.0, allowed, relative=True)  # the zero bucket
    scale = max(abs(found), _ZERO_FLOOR_MS)
    return Difference(name, said, found, abs(said - found) / scale, allowed, relative=True)


def verify_checked(
    summary: Mapping[str, Any], records: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """`verify`'s report as JSON (VerifyReport.to_json: ok, records, the largest relative
    difference per latency, failures, every figure) with the seconds it took."""
    started = time.perf_counter()
    report = verify(summary, records)
    return {**report.to_json(), "seconds": round(time.perf_counter() - started, 2)}


def verify_text(checked: Mapping[str, Any], *, source: str) -> str:
    """`verify_checked`'s answer as the lines a person reads: a heading naming `source`, a line
    per figure (the summary's value, the records', the difference against the allowed
    error), the largest percentile difference per latency, and the verdict."""
    lines = [f"{checked['records']:,} records from {source} ({checked['seconds']:.1f} s)"]
    for d in checked["figures"]:
        if d["difference"] is None:
            shown = "missing" if d["summary"] is None or d["records"] is None else "differs"
        elif d["relative"]:
            shown = f"{d['difference'] * 100:.4f} % (allowed {d['allowed'] * 100:.2f} %)"
        else:
            shown = f"{d['difference']:g} (allowed {d['allowed']:g})"
        mark = "ok  " if d["ok"] else "DIFF"
        lines.append(
            f"  {mark} {d['figure']:<28} summary {_short(d['summary']):>14}  records "
            f"{_short(d['records']):>14}  {shown}"
        )
    for name, largest in (checked.get("largest_percentile_difference") or {}).items():
        if largest is not None:
            lines.append(f"  largest {name} percentile difference: {largest * 100:.4f} %")
    gaps = checked.get("inter_chunk") or {}
    if gaps.get("samples"):
        lines.append(
            f"  inter-chunk samples: {gaps['samples']:,} from {gaps['records_with_gaps']:,} "
            f"records ({gaps['distinct_values']:,} distinct microsecond values held)"
        )
    unchecked = checked.get("unchecked") or []
    for item in unchecked:
        lines.append(f"  NOT CHECKED {item['figure']}: {item['reason']}")
    failures = len(checked["failures"])
    if not checked["ok"]:
        lines.append(f"{failures} figures disagree")
    elif unchecked:
        lines.append(f"every figure checked agrees; {len(unchecked)} could not be checked")
    else:
        lines.append("every figure agrees")
    return "\n".join(lines)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 14 else text[:13] + "…"
