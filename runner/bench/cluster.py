"""Benchmark: microseconds per `Cluster.submit` on an agentic reuse pattern (prints figures).

Not a test and never imported by the package: `python -m runner bench cluster [--json]`.
It owns its synthetic workload and reads the process CPU clock around whole timing loops;
the cluster itself still runs on the virtual clock the workload advances.

Workload: 256 closed-loop lanes; each lane runs conversations of 20 turns whose prompt is a
system prompt shared by all lanes of one of 16 agent types (~120 blocks), a per-conversation
context (~80 blocks) and +10 blocks per turn, so prompts span ~200 to ~400 blocks (~300 on
average); `bind` on every turn but the last, which sends `close`.
"""

from __future__ import annotations

import heapq
import random
import time

from runner.cluster.cluster import Cluster, ClusterRequest, Placement
from runner.cluster.config import ClusterConfig, RouterMode
from runner.cluster.keys import chain_block_keys

__all__ = ["run"]

_BLOCK_TOKENS = 64
_AGENT_TYPES = 16
_SYSTEM_BLOCKS = 120
_CONTEXT_BLOCKS = 80
_BLOCKS_PER_TURN = 10
_TURNS = 20
_THINK_S = 2.0


def run(*, requests: int, lanes: int, router: RouterMode, seed: int) -> dict[str, float]:
    """Record a closed-loop stream once, then time keying and submits in tight loops.

    Timings are CPU seconds (process_time) of whole loops, best of three: on a shared
    machine that is far steadier than summing wall-clock time around each call.
    """
    config = ClusterConfig(router=router, seed=seed)
    stream, keyings = _record(config, requests=requests, lanes=lanes, seed=seed)

    def time_keying() -> float:
        t0 = time.process_time()
        for base, parts in keyings:
            base + chain_block_keys(parts, seed=base[-1])
        return time.process_time() - t0

    def time_submits() -> tuple[float, Cluster]:
        cluster = Cluster(config)
        submit = cluster.submit
        t0 = time.process_time()
        for request, now_s in stream:
            submit(request, now_s)
        return time.process_time() - t0, cluster

    keying_s = min(time_keying() for _ in range(3))
    runs = [time_submits() for _ in range(3)]
    submit_s = min(cpu_s for cpu_s, _ in runs)
    end_s = stream[-1][1]
    totals = runs[0][1].stats(end_s)["totals"]
    return {
        "requests": requests,
        "us_per_submit": submit_s / requests * 1e6,
        "us_per_request_keying": keying_s / requests * 1e6,
        "mean_prompt_blocks": totals["prompt_tokens"] / requests / _BLOCK_TOKENS,
        "prefix_cache_hit_ratio": totals["prefix_cache_hit_ratio"],
        "simulated_s": end_s,
    }


def _record(
    config: ClusterConfig, *, requests: int, lanes: int, seed: int
) -> tuple[list[tuple[ClusterRequest, float]], list[tuple[tuple[int, ...], range]]]:
    """Drive a cluster closed-loop; return what was submitted when, and each keying step."""
    rng = random.Random(seed)
    cluster = Cluster(config)
    system_keys = [
        chain_block_keys(range(agent * 10_000, agent * 10_000 + _SYSTEM_BLOCKS))
        for agent in range(_AGENT_TYPES)
    ]
    next_part = 10_000 * _AGENT_TYPES  # fresh block contents come from this counter
    stream: list[tuple[ClusterRequest, float]] = []
    keyings: list[tuple[tuple[int, ...], range]] = []

    # Per lane: (session id, turn index, keys so far)
    lane_state: list[tuple[str, int, tuple[int, ...]]] = [("", _TURNS, ()) for _ in range(lanes)]
    ready: list[tuple[float, int]] = [(rng.uniform(0, _THINK_S), lane) for lane in range(lanes)]
    heapq.heapify(ready)
    conversations = 0
    for n in range(requests):
        now_s, lane = heapq.heappop(ready)
        session_id, turn, keys = lane_state[lane]
        if turn >= _TURNS:  # start a new conversation on this lane
            conversations += 1
            session_id, turn = f"s{conversations}", 0
            keys = system_keys[rng.randrange(_AGENT_TYPES)]
            parts = range(next_part, next_part + _CONTEXT_BLOCKS)
            next_part += _CONTEXT_BLOCKS
            keyings.append((keys, parts))
            keys = keys + chain_block_keys(parts, seed=keys[-1])
        parts = range(next_part, next_part + _BLOCKS_PER_TURN)
        next_part += _BLOCKS_PER_TURN
        keyings.append((keys, parts))
        keys = keys + chain_block_keys(parts, seed=keys[-1])
        final = turn == _TURNS - 1
        control = (
            {"session_id": session_id, "action": "close"}
            if final
            else {"session_id": session_id, "action": "bind", "timeout": 300}
        )
        request = ClusterRequest(
            request_id=f"r{n}",
            block_keys=keys,
            prompt_tokens=len(keys) * _BLOCK_TOKENS + 17,
            output_tokens=rng.randint(50, 400),
            session_control=control,
        )
        stream.append((request, now_s))
        placement = cluster.submit(request, now_s)
        assert isinstance(placement, Placement)
        lane_state[lane] = (session_id, turn + 1, keys)
        heapq.heappush(ready, (placement.end_s + rng.expovariate(1 / _THINK_S), lane))
    return stream, keyings
