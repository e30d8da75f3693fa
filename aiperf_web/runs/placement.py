"""The summary's placement figures as flat rows (the "All figures" table, the CSV, the
comparison): each count followed by its percentage. The percentages are the engine's
(runner/affinity/placement.py puts them in every snapshot and summary; `placement_pcts` gives
them, by the same rule, for a summary stored before). The run page's Placement card is
reports/cards/placement.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner import PLACEMENT_PCTS, placement_pcts


def placement_rows(figures: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The summary's placement as flat rows, each count followed by its percentage."""
    pcts = placement_pcts(figures)
    rows: list[tuple[str, Any]] = []
    for name, value in figures.items():
        if name in PLACEMENT_PCTS:
            continue
        rows.append((f"placement.{name}", value))
        if f"{name}_pct" in pcts:
            rows.append((f"placement.{name}_pct", pcts[f"{name}_pct"]))
    return rows
