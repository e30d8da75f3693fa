"""The service CLI's compare table: heads from what differs, the noise mark, the shared line
and one sentence per configuration, as the API answers them (and an older service's answer
without them still prints)."""

from __future__ import annotations

from typing import Any

from runner.service.display import compare_table
from runner.service.shapes import Compare, parse


def _answer(**extra: Any) -> dict[str, Any]:
    run = {"status": "succeeded", "scenario": "demo", "target": "mock", "affinity": "none",
           "scope": "lineage"}  # fmt: skip
    cells = [
        {"value": 20.0, "delta_pct": None, "status": "ok", "verdict": "reference"},
        {"value": 24.0, "delta_pct": 20.0, "status": "regressed", "verdict": "within noise"},
    ]
    answer: dict[str, Any] = {
        "runs": [
            {**run, "id": "a" * 36, "policy": "legacy", "letter": "A", "head": "legacy"},
            {**run, "id": "b" * 36, "policy": "spawn-pin", "letter": "B", "head": "spawn-pin"},
        ],
        "metrics": [{"key": "ttft_ms.p50", "label": "TTFT p50", "unit": "ms", "cells": cells}],
        "same_for_all": "all runs: scenario demo, c=16",
        "sentences": ["spawn-pin against legacy: TTFT p50 +20 % (within noise) (2 runs each)."],
    }
    answer.update(extra)
    return answer


def test_compare_heads_columns_by_what_differs_and_says_the_sentences() -> None:
    text = compare_table(parse(Compare, _answer(), where="test"))
    lines = text.splitlines()
    assert "A: legacy" in lines[0] and "B: spawn-pin" in lines[0]
    row = next(line for line in lines if line.startswith("TTFT p50"))
    assert "24 (+20.0 %) ~" in row
    assert lines[-2] == "all runs: scenario demo, c=16"
    assert lines[-1].startswith("spawn-pin against legacy: TTFT p50 +20 % (within noise)")


def test_an_older_services_answer_still_prints() -> None:
    old = _answer()
    for r in old["runs"]:
        del r["letter"], r["head"]
    del old["same_for_all"], old["sentences"]
    text = compare_table(parse(Compare, old, where="test"))
    assert "aaaaaaaa legacy/lineage" in text.splitlines()[0]
