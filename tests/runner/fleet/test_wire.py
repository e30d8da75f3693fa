"""The fleet's wire (runner/fleet/wire.py): a host builds, from the workload it read once and a
credit's names, the very bytes and headers the orchestrator's own builder makes of the
dispatch; credits and results cross intact. No Redis, no processes: the encodings alone (the
directory's Redis check still applies)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from runner.affinity.emitters import AffinityConfig, AffinityKind
from runner.client import ResponseResult
from runner.errors import ErrorCategory
from runner.fleet.host import _Builder
from runner.fleet.wire import (
    CreditEntry,
    Workload,
    affinity_of,
    decode_credits,
    decode_results,
    decode_workload,
    encode_credits,
    encode_results,
    encode_workload,
    result_row,
)
from runner.replay.engine import Dispatch, EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.routing.router import Policy
from runner.trace import SyntheticConfig, Trace, generate_synthetic, load_trace
from runner.wallclock import LiveConfig, replay_live
from runner.wallclock.prompts import RequestBuilder
from tests.fixtures import CLAUDE_CODE_SUBAGENTS, DAG_FORK_FANOUT, DAG_SPAWN


class _Comparing:
    """A sender that answers at once, and for every dispatch builds its request twice: with
    the orchestrator's builder (what an in-process run sends) and as a host would, from the
    credit the fleet puts on the wire and the workload after its trip through the wire."""

    def __init__(self, traces: list[Trace], config: LiveConfig) -> None:
        self.builder = RequestBuilder(
            traces, model=config.model, isolate_trees=config.isolate_trees
        )
        trees = tuple(tree for trace in traces for tree in trace.trees)
        self.index = {id(tree): i for i, tree in enumerate(trees)}
        workload = Workload(
            trees=trees,
            scopes=tuple(self.builder.scope(tree) for tree in trees),
            model=config.model,
            salt=self.builder.salt,
            isolate_trees=config.isolate_trees,
            want_worker_id=config.want_worker_id,
            ignore_eos=config.ignore_eos,
        )
        self.host = _Builder(decode_workload(encode_workload(workload)))
        self.compared = 0
        self.with_affinity = 0
        self.literal = 0

    async def send(self, dispatch: Dispatch, on_result: Callable[[ResponseResult], None]) -> None:
        request, headers = self.builder.build(dispatch)
        credit = dispatch.credit
        entry = CreditEntry(
            1,
            self.index[id(credit.tree)],
            credit.template_id,
            credit.turn_index,
            credit.root_id,
            credit.session_id,
            credit.priming,
            credit.turn_index + 1 >= credit.num_turns,
            affinity_of(dispatch.affinity),
        )
        (wired,) = decode_credits(encode_credits([entry]))
        built, built_headers = self.host.build(wired)
        assert built.content == request.encoded(), credit
        assert built.path == request.path
        assert dict(built_headers) == dict(headers)
        self.compared += 1
        self.with_affinity += entry.affinity is not None
        self.literal += credit.turn is not None and credit.turn.messages is not None
        now = time.perf_counter()
        await asyncio.sleep(0)
        on_result(_ok(now))

    async def aclose(self) -> None:
        return None


def _ok(now: float) -> ResponseResult:
    return ResponseResult(
        start_s=now,
        end_s=now,
        first_token_s=now,
        chunk_times_s=(now,),
        output_tokens=1,
        prompt_tokens=None,
        cached_tokens=None,
        served_by=None,
        status=200,
        error=None,
    )


@pytest.mark.parametrize(
    "kind", [AffinityKind.NONE, AffinityKind.DYNAMO_NVEXT, AffinityKind.DYNAMO_HEADERS]
)
def test_hosts_build_the_bytes_the_orchestrator_would(kind):
    """Synthesized prompts (SPAWN and FORK trees), literal messages (Claude Code, dag_jsonl
    SPAWN and FORK fan-outs), replayed from mid-tree with priming turns, each affinity kind:
    every request's body, path and headers as the host builds them equal the in-process
    builder's, byte for byte."""
    traces = [
        generate_synthetic(
            SyntheticConfig(
                seed=4,
                trees=6,
                main_turns=(3, 6),
                subagent_turns=(1, 3),
                spawn_probability=0.5,
                fork_probability=0.3,
            )
        ),
        load_trace(CLAUDE_CODE_SUBAGENTS),
        load_trace(DAG_SPAWN),
        load_trace(DAG_FORK_FANOUT),
    ]
    config = LiveConfig(
        endpoint="http://127.0.0.1:9",
        model="mock-model",
        replay=ReplayConfig(
            concurrency=6, max_trees=12, start_window=(0.0, 0.5), speedup=1e6, seed=3
        ),
        engine=EngineConfig(
            client_workers=3, policy=Policy.SPAWN_PIN, affinity=AffinityConfig(kind=kind)
        ),
    )
    sender = _Comparing(traces, config)
    summary = asyncio.run(replay_live(traces, config, sender=sender)).summary
    assert sender.compared == summary["requests"] > 50
    assert sender.literal > 0
    if kind is AffinityKind.NONE:
        assert sender.with_affinity == 0
    else:
        assert sender.with_affinity == sender.compared


def test_credits_and_results_cross_the_wire_intact():
    entry = CreditEntry(
        7,
        3,
        "main",
        2,
        "t4:root",
        "t4:main",
        False,
        True,
        ("t4:root", {"action": "bind", "session_id": "t4:root"}, (("X-Session-ID", "a"),)),
    )
    # A tick's credits share one stream entry, whatever their ids hold (newlines, anything).
    odd = CreditEntry(8, 0, "s\n2 ✓", 0, "", "s\n2 ✓", True, False, None)
    assert decode_credits(encode_credits([entry])) == [entry]
    assert decode_credits(encode_credits([entry, odd, entry])) == [entry, odd, entry]
    assert odd.decision().key is None and entry.decision().headers == (("X-Session-ID", "a"),)
    result = ResponseResult(
        start_s=10.0,
        end_s=12.0,
        first_token_s=10.5,
        chunk_times_s=(10.5, 11.0, 11.5, 12.0),
        output_tokens=4,
        prompt_tokens=100,
        cached_tokens=64,
        served_by="w3",
        status=200,
        error=None,
    )
    failed = ResponseResult.failure(1.0, ErrorCategory.CONNECT, "refused", end_s=1.0)
    # A host's batch is one item: its results in order, onto the orchestrator's clock.
    rows = [result_row(7, result, 1000.0), result_row(1, failed, 1000.0)]
    (first_id, back), (second_id, lost) = decode_results(encode_results(rows), 1000.0)
    assert (first_id, second_id) == (7, 1)
    assert back.ttft_s == pytest.approx(0.5) and back.latency_s == pytest.approx(2.0)
    assert len(back.chunk_times_s) == 4
    assert back.chunk_times_s[-1] - back.chunk_times_s[0] == pytest.approx(1.5)
    assert back.served_by == "w3" and back.cached_tokens == 64
    assert lost.error is ErrorCategory.CONNECT and lost.error_detail == "refused"
