"""The run page's Placement card: where the inference server put each agent tree, read from
the engine's placement figures and their percentages (`runner/affinity/placement.py`): the
summary's for a finished run, else the latest snapshot's. Pure functions; the page's script
(static/js/charts/view.js drawPlacement) redraws the same cells from each live snapshot's
figures, and the chart of the card is declared in live/charts.py (card "placement").

Null placement means the server named no serving worker, so placement is unknown (not
perfect); a live run's snapshots also carry null until the first answer comes back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from pydantic import ValidationError

from runner import KeyScope, RunSpec, SpecError, placement_pcts

PlacementState = Literal["reported", "not-reported", "waiting", "not-recorded"]

# What a server must send for placement to be seen, named as a Dynamo user looks for it.
NOT_REPORTED = (
    "The server did not report which worker served each request "
    "(Dynamo: nvext.extra_fields worker_id)"
)

# The engine's figures and the percentages derived from them, in the order a reader wants
# them, with the words the page, the "All figures" table and the comparison use.
LABELS: dict[str, str] = {
    "placement.trees": "trees whose serving worker is known",
    "placement.trees_split": "trees split across inference workers",
    "placement.trees_split_pct": "trees split across inference workers, % of trees",
    "placement.child_requests": "child requests (subagents) whose root's worker is known",
    "placement.child_requests_on_root_worker": "child requests served on their root's worker",
    "placement.child_requests_on_root_worker_pct": "child requests on their root's worker, %",
    "placement.keyed_requests": "requests carrying an affinity key",
    "placement.key_misses": "requests off their affinity key's worker (key misses)",
    "placement.key_misses_pct": "key misses, % of keyed requests",
    "placement": "placement (where the server put each tree)",
}

# What the run's affinity promises about placement, which decides what its figures should be.
AffinityMode = KeyScope


def affinity_mode(spec: Mapping[str, Any] | None) -> AffinityMode:
    """What one affinity key covers, the engine's answer (RunSpec.key_scope, which the emitter
    keys by): lineage, one key per tree, so a tree stays on one worker; conversation, one key
    per session; none, no key. A stored spec the engine no longer reads promises nothing."""
    try:
        return RunSpec.model_validate(dict(spec or {})).key_scope
    except (ValidationError, SpecError):
        return "none"


class PlacementCard(TypedDict):
    state: PlacementState
    mode: AffinityMode
    trees: int | None
    trees_split: int | None
    trees_split_pct: float | None
    child_requests: int | None
    child_requests_on_root_worker: int | None
    child_requests_on_root_worker_pct: float | None
    keyed_requests: int | None
    key_misses: int | None
    key_misses_pct: float | None


def placement_card(
    *,
    summary: Mapping[str, Any] | None,
    latest: Mapping[str, Any] | None,
    spec: Mapping[str, Any] | None,
) -> PlacementCard:
    """The card's figures and state: the summary once the run has one, else the latest
    snapshot. `not-recorded`: a run stored before the engine reported placement."""
    source: Mapping[str, Any] | None = None
    if summary:
        source = summary
    elif latest:
        source = latest
    raw = source.get("placement") if source is not None else None
    state: PlacementState
    if isinstance(raw, Mapping):
        state = "reported"
    elif source is None or "placement" not in source:
        state = "not-recorded" if summary else "waiting"
    elif summary or (latest or {}).get("requests"):
        # Null after requests were answered: the server names no serving worker.
        state = "not-reported"
    else:
        state = "waiting"
    figures: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    ratios = placement_pcts(figures)
    return {
        "state": state,
        "mode": affinity_mode(spec),
        "trees": figures.get("trees"),
        "trees_split": figures.get("trees_split"),
        "trees_split_pct": ratios["trees_split_pct"],
        "child_requests": figures.get("child_requests"),
        "child_requests_on_root_worker": figures.get("child_requests_on_root_worker"),
        "child_requests_on_root_worker_pct": ratios["child_requests_on_root_worker_pct"],
        "keyed_requests": figures.get("keyed_requests"),
        "key_misses": figures.get("key_misses"),
        "key_misses_pct": ratios["key_misses_pct"],
    }
