"""BuildPacer: a wave of builds yields the loop every slice, and every build still happens."""

from __future__ import annotations

import asyncio
import itertools
import time

from runner.wallclock.pacing import BuildPacer, loop_pacer


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def _wave(pacer: BuildPacer, builds: int, build_s: float, done: list[int]) -> None:
    async def build(index: int) -> None:
        await pacer.turn()
        _busy(build_s)
        done.append(index)

    await asyncio.gather(*(build(i) for i in range(builds)))


def test_a_timer_due_during_a_wave_runs_after_a_slice_not_after_the_wave() -> None:
    """Fifty 5 ms builds all ready at once, a 20 ms slice: the timer due meanwhile (a host's
    heartbeat, a connect timeout) runs after a few builds, not after all fifty."""

    async def main() -> tuple[list[int], list[int]]:
        done: list[int] = []
        seen: list[int] = []
        asyncio.get_running_loop().call_later(0, lambda: seen.append(len(done)))
        await _wave(BuildPacer(slice_s=0.02), 50, 0.005, done)
        return done, seen

    done, seen = asyncio.run(main())
    assert sorted(done) == list(range(50))
    assert len(seen) == 1 and 1 <= seen[0] <= 10, seen


def test_without_a_slice_each_turn_still_builds_one() -> None:
    """A slice of zero: every turn builds exactly one request and then lets the loop turn."""

    async def main() -> list[int]:
        done: list[int] = []
        turns: list[int] = []

        async def count_turns() -> None:
            while len(done) < 5:
                turns.append(len(done))
                await asyncio.sleep(0)

        ticker = asyncio.create_task(count_turns())
        await _wave(BuildPacer(slice_s=0.0), 5, 0.0, done)
        await ticker
        return turns

    turns = asyncio.run(main())
    # The ticker saw the builds one or two at a time, never the wave at once.
    steps = [b - a for a, b in itertools.pairwise(turns)]
    assert max(steps) <= 2 and turns[-1] >= 3, turns


def test_a_waiter_cancelled_leaves_the_others_waiting_to_build() -> None:
    async def main() -> tuple[list[int], bool]:
        pacer = BuildPacer(slice_s=0.0)
        done: list[int] = []

        async def build(index: int) -> None:
            await pacer.turn()
            done.append(index)

        tasks = [asyncio.create_task(build(i)) for i in range(6)]
        await asyncio.sleep(0)  # every task has started: one built, five wait
        tasks[3].cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        return done, isinstance(results[3], asyncio.CancelledError)

    done, cancelled = asyncio.run(main())
    assert cancelled and sorted(done) == [0, 1, 2, 4, 5]


def test_a_build_after_a_quiet_spell_goes_ahead_at_once() -> None:
    """A slice ends with its turn, spent or not: a later lone build does not wait a turn."""

    async def main() -> list[str]:
        pacer = BuildPacer(slice_s=0.001)
        await pacer.turn()
        _busy(0.002)  # this turn's slice, spent
        await asyncio.sleep(0.01)
        marks: list[str] = []
        asyncio.get_running_loop().call_soon(lambda: marks.append("the loop turned"))
        await pacer.turn()
        marks.append("built")
        return marks

    assert asyncio.run(main())[0] == "built"


def test_one_pacer_per_loop() -> None:
    async def pacer_twice() -> tuple[BuildPacer, BuildPacer]:
        return loop_pacer(), loop_pacer()

    a, b = asyncio.run(pacer_twice())
    c, _ = asyncio.run(pacer_twice())
    assert a is b and a is not c
