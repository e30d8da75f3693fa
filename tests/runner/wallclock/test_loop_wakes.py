"""The live driver's loop wakes for an answer only when the answer changes what it waits for
(runner/wallclock/replay.py, `_wake_if_needed`): an answer that makes something due before
the loop's timer (a session's next turn) wakes it at once, one that does not (an open loop's
answers, whose next arrival is already on the timer) lets it sleep. The sender here answers
every request on the loop's next turn (runner/bench/instant.py), so the loop's own work is
all there is to count."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from runner.bench.instant import InstantSender
from runner.replay.engine import Dispatch, Engine
from runner.replay.scheduler import ReplayConfig
from runner.trace import SyntheticConfig, generate_synthetic
from runner.wallclock import LiveConfig, replay_live


def _sessions(*, seed: int, trees: int, turns: int) -> Any:
    """Trees of one session of `turns` turns each, no children."""
    return generate_synthetic(
        SyntheticConfig(
            seed=seed,
            trees=trees,
            main_turns=(turns, turns),
            spawn_probability=0.0,
            fork_probability=0.0,
        )
    )


def _config(replay: ReplayConfig) -> LiveConfig:
    # A snapshot interval of 5 s: the loop's own timer is far off unless something is due.
    return LiveConfig(
        endpoint="http://127.0.0.1:9",  # never reached: the sender answers
        model="m",
        replay=replay,
        snapshot_interval_s=5.0,
    )


def _counting_turns(config: LiveConfig, trace: Any) -> tuple[dict[str, Any], int, float]:
    """Replay on the instant sender: the summary, the loop's turns (calls of the engine's
    `dispatch_due`) and the run's wall time."""
    turns = 0
    original = Engine.dispatch_due

    def counted(self: Engine, now_s: float) -> list[Dispatch]:
        nonlocal turns
        turns += 1
        return original(self, now_s)

    Engine.dispatch_due = counted  # type: ignore[method-assign]
    try:
        started = time.monotonic()
        result = asyncio.run(replay_live([trace], config, sender=InstantSender()))  # type: ignore[arg-type]
        return result.summary, turns, time.monotonic() - started
    finally:
        Engine.dispatch_due = original  # type: ignore[method-assign]


def test_answers_that_change_nothing_due_do_not_wake_the_loop() -> None:
    # An open loop of single-request trees: every answer ends its tree, and the next arrival
    # is already the loop's timer. Woken per answer, the loop would turn about twice per
    # request (once for the arrival, once for its answer).
    trace = _sessions(seed=2, trees=400, turns=1)
    replay = ReplayConfig(timing="rate", rate_per_s=200.0, concurrency=64, duration_s=1.5, seed=1)
    summary, turns, _ = _counting_turns(_config(replay), trace)
    requests = summary["requests"]
    assert requests >= 200, summary
    assert turns <= 1.3 * requests + 10, (turns, requests)


def test_an_answer_that_makes_the_next_turn_due_wakes_the_loop_at_once() -> None:
    # One lane of long sessions with no think time: each turn is due the moment the last one
    # answers. Were the loop left asleep until its timer (a snapshot interval of 5 s here),
    # 40 turns would take minutes.
    trace = _sessions(seed=4, trees=4, turns=20)
    replay = ReplayConfig(timing="closed", concurrency=1, max_requests=40, seed=1)
    summary, turns, elapsed_s = _counting_turns(_config(replay), trace)
    assert summary["requests"] == 40, summary
    assert elapsed_s < 5.0, f"40 back-to-back turns took {elapsed_s:.1f} s: answers slept"
    assert turns >= 40
