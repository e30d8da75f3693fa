"""Compare and history that say what differs (issue 27 item 2) and noise-aware verdicts (issue
20 item 6): heads from the fields that differ, the "all runs" line, the reference chosen on the
page and in the API, SLO and goodput rows, one sentence per configuration, "within noise" with
repeats and "no repeats" for a single pair, history lines split by configuration."""

from __future__ import annotations

import json
from typing import Any

from aiperf_web.reports.differences import (
    NO_REPEATS,
    config_groups,
    config_head,
    differing_fields,
    noise_verdict,
    pair_sentence,
    run_config,
    same_for_all,
)
from aiperf_web.runs.models import Run, Status
from aiperf_web.runs.verdict import KEY_METRICS
from tests.web.conftest import World

TTFT_P50 = next(m for m in KEY_METRICS if m.key == "ttft_ms.p50")
ORPHANS = next(m for m in KEY_METRICS if m.key == "orphaned_session_copies")


def _config(**spec: Any) -> Any:
    base = {"policy": "spawn-pin", "affinity": "dynamo-headers", "scope": "lineage",
            "timing": "lanes", "concurrency": 16, "duration_s": 30}  # fmt: skip
    return run_config({**base, **spec}, scenario="demo", endpoint="built-in mock",
                      target_kind="endpoint", server_kind="dynamo")  # fmt: skip


# -- pure: heads, the shared line, groups, noise, sentences ------------------------------------


def test_heads_name_only_the_fields_that_differ_and_the_rest_go_in_one_line() -> None:
    configs = [_config(concurrency=c) for c in (8, 16, 32, 64)]
    assert differing_fields(configs) == ["concurrency"]
    assert [config_head(c, ["concurrency"]) for c in configs] == ["c=8", "c=16", "c=32", "c=64"]
    shared = same_for_all(configs, ["concurrency"])
    assert shared == (
        "all runs: scenario demo, endpoint built-in mock, server dynamo, policy spawn-pin, "
        "affinity dynamo-headers, scope lineage, timing lanes, 30 s, no SLO"
    )
    assert "c=" not in shared
    mixed = [_config(policy="legacy", concurrency=8), _config(concurrency=8, duration_s=60)]
    fields = differing_fields(mixed)
    assert fields == ["policy", "duration"]
    assert [config_head(c, fields) for c in mixed] == ["legacy · 30 s", "spawn-pin · 60 s"]


def test_a_field_that_does_not_apply_splits_nothing() -> None:
    # Without affinity the scope binds nothing: two such runs are the same experiment.
    a = _config(affinity="none", scope="conversation")
    b = _config(affinity="none", scope="lineage")
    assert differing_fields([a, b]) == []
    assert config_head(a, []) == "same configuration"
    # Rate timing: the rate is a field; on lanes it reads "—" and is left out of a head.
    r = _config(timing="rate", rate_per_s=2.5, concurrency=None)
    fields = differing_fields([a, r])
    assert "rate" in fields and config_head(r, fields).count("2.5 trees/s") == 1
    assert "—" not in config_head(a, fields)


def test_repeats_group_by_configuration_in_order_of_first_appearance() -> None:
    configs = [_config(policy="legacy"), _config(), _config(policy="legacy"), _config()]
    groups = config_groups(configs, differing_fields(configs))
    assert [(g.head, g.members) for g in groups] == [("legacy", (0, 2)), ("spawn-pin", (1, 3))]


def test_noise_a_single_pair_claims_nothing_and_overlapping_repeats_are_within_noise() -> None:
    # One run each, TTFT +30 %: no repeats, whatever the size.
    assert noise_verdict(TTFT_P50, [100.0], [130.0]) == "no repeats"
    # Within the tolerance it is the same, repeats or not.
    assert noise_verdict(TTFT_P50, [100.0], [100.5]) == "same"
    # Repeats whose ranges overlap: within noise, though the means differ by 20 %.
    assert noise_verdict(TTFT_P50, [90.0, 110.0], [100.0, 140.0]) == "within noise"
    # Ranges apart, beyond the tolerance: worse for a figure where lower is better.
    assert noise_verdict(TTFT_P50, [98.0, 102.0], [150.0, 160.0]) == "worse"
    assert noise_verdict(TTFT_P50, [150.0, 160.0], [98.0, 102.0]) == "better"
    # One side single, inside the other's range: noise; outside it: too few repeats to tell.
    assert noise_verdict(TTFT_P50, [80.0, 140.0], [125.0]) == "within noise"
    assert noise_verdict(TTFT_P50, [90.0, 110.0], [200.0]) == "no repeats"
    assert noise_verdict(TTFT_P50, [None], [120.0]) == "n/a"


def test_one_sentence_per_pair_says_what_moved_and_that_there_are_no_repeats() -> None:
    reference = {"orphaned_session_copies": [150.0], "ttft_ms.p50": [40.0]}
    other = {"orphaned_session_copies": [0.0], "ttft_ms.p50": [20.0]}
    words = {
        "orphaned_session_copies": noise_verdict(ORPHANS, [150.0], [0.0]),
        "ttft_ms.p50": noise_verdict(TTFT_P50, [40.0], [20.0]),
    }
    sentence = pair_sentence(head="spawn-pin", ref_head="legacy", metrics=KEY_METRICS,
                             reference=reference, other=other, words=words)  # fmt: skip
    assert sentence == (
        f"spawn-pin against legacy: 150 → 0 orphaned copies, TTFT p50 −50 % ({NO_REPEATS})."
    )
    # With repeats each figure says whether it stands out of the noise.
    reference = {"ttft_ms.p50": [90.0, 110.0], "orphaned_session_copies": [150.0, 160.0]}
    other = {"ttft_ms.p50": [100.0, 140.0], "orphaned_session_copies": [0.0, 0.0]}
    words = {
        "ttft_ms.p50": noise_verdict(TTFT_P50, reference["ttft_ms.p50"], other["ttft_ms.p50"]),
        "orphaned_session_copies": noise_verdict(
            ORPHANS, reference["orphaned_session_copies"], other["orphaned_session_copies"]
        ),
    }
    sentence = pair_sentence(head="spawn-pin", ref_head="legacy", metrics=KEY_METRICS,
                             reference=reference, other=other, words=words)  # fmt: skip
    assert sentence == (
        "spawn-pin against legacy: 155 → 0 orphaned copies (better, beyond noise), "
        "TTFT p50 +20 % (within noise) (2 runs each)."
    )


# -- the page and the API ------------------------------------------------------------------------


def _run(world: World, *, spec: dict[str, Any], **summary: Any) -> Run:
    base: dict[str, Any] = {
        "requests": 100, "errors": 0, "requests_per_s": 10.0, "orphaned_session_copies": 0,
        "ttft_ms": {"p50": 20.0, "p99": 50.0}, "itl_ms": {"p99": 8.0},
        "latency_ms": {"p99": 900.0},
        "goodput": {"slo_ms": {"ttft": 500.0}, "good_requests": 90, "good_ratio": 0.9,
                    "goodput_per_s": 9.0},
    }  # fmt: skip
    return Run.objects.create(
        team=world.team, scenario=world.scenario, scenario_name=world.scenario.name,
        endpoint=world.endpoint, endpoint_name=world.endpoint.name, target_kind="endpoint",
        spec={**world.scenario.spec, "slo_ttft_ms": 500.0, **spec}, status=Status.SUCCEEDED,
        summary={**base, **summary},
    )  # fmt: skip


def _cell(metrics: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = next(m for m in metrics if m["key"] == key)["cells"]
    return cells


def test_compare_of_four_concurrencies_heads_each_column_by_its_concurrency(
    world: World,
) -> None:
    runs = [
        _run(world, spec={"concurrency": c}, ttft_ms={"p50": 10.0 * c, "p99": 50.0})
        for c in (8, 16, 32, 64)
    ]
    ids = ",".join(str(r.uuid) for r in runs)
    html = world.client("viewer").get(f"/reports/compare/?runs={ids}").content.decode()
    head = html.split('id="delta-table"')[1].split("</thead>")[0]
    for c in (8, 16, 32, 64):
        assert f"c={c}" in head
    assert "spawn-pin" not in head and "lineage" not in head
    shared = html.split('id="same-for-all">')[1].split("</p>")[0]
    assert shared.startswith("all runs: scenario ") and "c=" not in shared
    assert "SLO TTFT ≤ 500 ms" in shared
    # SLO and goodput rows.
    assert 'id="slo-row"' in html and 'data-key="goodput.good_ratio"' in html
    slo_row = html.split('id="slo-row">')[1].split("</tr>")[0]
    assert slo_row.count('<td class="num">TTFT ≤ 500 ms</td>') == 4
    assert 'data-key="goodput.goodput_per_s"' in html
    # One run of each: every delta is muted and the page says why.
    assert "delta-worse" not in html.split('id="delta-table"')[1].split("</table>")[0]
    assert NO_REPEATS in html
    # One sentence per configuration against the reference (the first named).
    sentences = html.split('id="pair-sentences">')[1].split("</ul>")[0]
    assert sentences.count("<li>") == 3 and "c=16 against c=8: TTFT p50 +100 %" in sentences
    # The chart legends carry the same heads.
    data = json.loads(html.split('id="compare-data" type="application/json">')[1].split("<")[0])
    assert [r["label"] for r in data["runs"]] == ["A: c=8", "B: c=16", "C: c=32", "D: c=64"]


def test_the_reference_is_chosen_on_the_page_and_in_the_api(world: World) -> None:
    a = _run(world, spec={"policy": "legacy"}, orphaned_session_copies=150,
             ttft_ms={"p50": 40.0})  # fmt: skip
    b = _run(world, spec={"policy": "spawn-pin"}, ttft_ms={"p50": 20.0})
    ids = f"{a.uuid},{b.uuid}"
    client = world.client("viewer")
    default = client.get(f"/reports/compare/?runs={ids}").content.decode()
    assert "change against A: legacy" in default
    assert f'<option value="{a.uuid}" selected>' in default
    chosen = client.get(f"/reports/compare/?runs={ids}&ref={b.uuid}").content.decode()
    assert "change against B: spawn-pin" in chosen
    assert f'<option value="{b.uuid}" selected>' in chosen
    assert "legacy against spawn-pin: 0 → 150 orphaned copies, TTFT p50 +100 %" in chosen
    assert client.get(f"/reports/compare/?runs={ids}&ref=nope").status_code == 400

    api = world.api("viewer")
    out = api.get(f"/api/v1/compare?runs={ids}").json()
    assert out["reference"] == str(a.uuid) and out["differs"] == ["policy"]
    assert [r["head"] for r in out["runs"]] == ["legacy", "spawn-pin"]
    assert out["sentences"] == [
        f"spawn-pin against legacy: 150 → 0 orphaned copies, TTFT p50 −50 % ({NO_REPEATS})."
    ]
    cells = _cell(out["metrics"], "orphaned_session_copies")
    # The tolerance alone says improved; the verdict word, from one run each, claims nothing.
    assert [c["status"] for c in cells] == ["ok", "improved"]
    assert [c["verdict"] for c in cells] == ["reference", "no repeats"]
    flipped = api.get(f"/api/v1/compare?runs={ids}&reference={b.uuid}").json()
    assert flipped["reference"] == str(b.uuid)
    assert [r["id"] for r in flipped["runs"]] == [str(b.uuid), str(a.uuid)]
    assert [r["letter"] for r in flipped["runs"]] == ["B", "A"]
    assert api.get(f"/api/v1/compare?runs={ids}&reference={world.run.uuid}").status_code == 422


def test_repeats_make_overlapping_differences_within_noise_and_apart_ones_coloured(
    world: World,
) -> None:
    legacy = [
        _run(world, spec={"policy": "legacy"}, ttft_ms={"p50": p50}, orphaned_session_copies=o)
        for p50, o in ((20.0, 150), (26.0, 160))
    ]
    pinned = [
        _run(world, spec={"policy": "spawn-pin"}, ttft_ms={"p50": p50}) for p50 in (24.0, 30.0)
    ]
    ids = ",".join(str(r.uuid) for r in (*legacy, *pinned))
    out = world.api("viewer").get(f"/api/v1/compare?runs={ids}").json()
    ttft = _cell(out["metrics"], "ttft_ms.p50")
    assert [c["verdict"] for c in ttft] == ["reference", "repeat", "within noise", "within noise"]
    orphans = _cell(out["metrics"], "orphaned_session_copies")
    assert [c["verdict"] for c in orphans][2:] == ["better", "better"]
    assert out["sentences"] == [
        "spawn-pin against legacy: 155 → 0 orphaned copies (better, beyond noise), "
        "TTFT p50 +17 % (within noise) (2 runs each)."
    ]
    html = world.client("viewer").get(f"/reports/compare/?runs={ids}").content.decode()
    table = html.split('id="delta-table"')[1].split("</table>")[0]
    assert "within noise" in table and "delta-worse" not in table
    assert 'class="delta-better"' in table


def test_history_draws_a_line_per_configuration_that_differs(world: World) -> None:
    Run.objects.filter(pk=world.run.pk).delete()  # these runs alone
    for c in (8, 8, 64):
        _run(world, spec={"concurrency": c, "policy": "spawn-pin"})
    _run(world, spec={"concurrency": 8, "policy": "legacy"})
    page = world.client("viewer").get(f"/reports/scenarios/{world.scenario.uuid}/history/")
    html = page.content.decode()
    data = json.loads(html.split('id="history-data" type="application/json">')[1].split("<")[0])
    groups = [p["group"] for p in data["points"]]
    assert groups == ["spawn-pin · c=8", "spawn-pin · c=8", "spawn-pin · c=64", "legacy · c=8"]
    assert "one line per configuration (policy, concurrency)" in html
    same = html.split('id="history-same">')[1].split("</p>")[0]
    assert same.startswith("all runs: scenario ") and "SLO TTFT ≤ 500 ms" in same
    table = html.split('id="history-runs"')[1].split("</table>")[0]
    assert table.count("<td>spawn-pin · c=8</td>") == 2 and "<td>legacy · c=8</td>" in table
