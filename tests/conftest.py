"""Suite-wide rules: a test marked `infra_missing` (tests/infra.py) skips or, under CI, fails
with its reason; under CI the web and browser tests run on the production shape or fail; every
test that uses a real worker, server, browser or the wall clock is marked `live` (`make
test-fast` runs the rest); and under pytest-xdist the tests that share a heavy real part run
on one worker (`PartScheduling`)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.infra import strict, unavailable

TESTS = Path(__file__).resolve().parent
PRODUCTION_SHAPE_TESTS = (TESTS / "web", TESTS / "browser")

# What makes a test `live`: a fixture that starts a real worker process or thread, a server
# on a socket, a browser, a real Dynamo or vLLM; a mark saying so; or a folder whose tests
# replay on the wall clock or drive real parts throughout.
LIVE_FIXTURES = frozenset(
    {
        "run_worker",  # a celery worker process (embedded: a WorkController thread)
        "live_world",
        "hosts_worker",  # the host pool processes of fleet runs
        "transactional_db",  # committed rows: what a worker in another process must see
        "service",  # uvicorn on a socket (tests/web/conftest.py, tests/web/test_ops.py)
        "server",  # `manage.py serve` (tests/browser)
        "site",
        "browser",
        "context",
        "real_dynamo",
        "real_vllm",
        "words_vllm",
    }
)
LIVE_MARKS = ("slow", "dynamo", "vllm")
LIVE_FOLDERS = (
    TESTS / "browser",
    TESTS / "dynamo",
    TESTS / "vllm",
    TESTS / "runner" / "wallclock",  # live replays paced by the real clock
    TESTS / "runner" / "fleet",  # client-worker host processes on Redis
)
LIVE_FILES = (
    TESTS / "test_infra.py",  # runs the suite's own tests in pytest subprocesses
    TESTS / "web" / "test_commands.py",  # `manage.py serve` with its mock and worker
    TESTS / "web" / "test_proxy_headers.py",  # `manage.py serve` behind a proxy
    TESTS / "runner" / "sweep" / "test_cli.py",  # live sweeps on a mock-server process
    TESTS / "runner" / "mockserver" / "test_processes.py",  # mock front processes
)
LIVE_TESTS = frozenset(
    {
        # 900 s of a simulated cluster at time_scale 0.05: 45 s on the wall clock
        "tests/runner/test_face.py::test_a_snapshot_at_64_client_and_64_inference_workers_"
        "stays_under_16_kb",
    }
)


def is_live(item: Any) -> bool:
    if LIVE_FIXTURES.intersection(item.fixturenames):
        return True
    if any(item.get_closest_marker(name) is not None for name in LIVE_MARKS):
        return True
    if item.nodeid in LIVE_TESTS:
        return True
    path = Path(str(item.fspath))
    return path in LIVE_FILES or any(folder in path.parents for folder in LIVE_FOLDERS)


def pytest_configure(config: Any) -> None:
    """A suite started in the background of a shell without job control (`make test &`, a CI
    runner's step) inherits SIGINT ignored, and so would every process a test starts: the
    tests that press Ctrl-C on a child (a watcher, a replay, a mock server, `serve`) would
    find it deaf. A handler of our own is reset to the default in each child at exec, where
    an ignored signal stays ignored."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks given here
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Marks the live tests; then, under CI, a web or browser test collected without
    DATABASE_URL and REDIS_URL would run on the embedded default and look green: each fails
    instead, saying what to set."""
    for item in items:
        if is_live(item):
            item.add_marker(pytest.mark.live)
    if not strict() or (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
        return
    missing = pytest.mark.infra_missing(
        "CI runs the web and browser tests on PostgreSQL and Redis, but DATABASE_URL and "
        'REDIS_URL are not both set: bring them up with scripts/services.sh up, then eval "$('
        'scripts/services.sh env)"'
    )
    for item in items:
        if any(folder in Path(str(item.fspath)).parents for folder in PRODUCTION_SHAPE_TESTS):
            item.add_marker(missing)


def pytest_runtest_setup(item: Any) -> None:
    mark = item.get_closest_marker("infra_missing")
    if mark is not None:
        unavailable(mark.args[0])


# -- pytest-xdist (`make unit` runs `-n $(PYTEST_WORKERS) --dist loadfile`) --------------------

# Tests that share a heavy real part run on one xdist worker, one after another: the browser
# tests share one `manage.py serve` and tests/browser/artifacts (its log, Chromium's profile);
# a real Dynamo or vLLM takes most of the machine while it runs, and two at once would only
# slow each other down (and `stack.dynamo` starts on the script's default port).
PART_GROUPS = (
    ("tests/browser/", "browser"),
    ("tests/dynamo/", "real-servers"),
    ("tests/web/test_real_dynamo", "real-servers"),
    ("tests/vllm/", "real-servers"),
    ("tests/web/test_real_vllm", "real-servers"),
)

# The longest work units start first (longest-processing-time-first: the run ends near the
# total divided by the workers, instead of waiting on a long unit that happened to start
# last). Wall seconds of each unit in a `-n 4` run of the whole suite on a loaded machine
# (scripts/unit_times.py prints them from its junit XML); the units not named here follow,
# those with the most tests first.
LONGEST_UNITS = (
    "real-servers",  # 2060 s: vLLM 1546, Dynamo 514
    "browser",  # 1705 s
    "tests/web/test_service_cli.py",  # 661 s
    "tests/test_infra.py",  # 532 s
    "tests/runner/wallclock/test_live_replay.py",  # 416 s
    "tests/web/test_faults_live.py",  # 357 s
    "tests/web/test_ops.py",  # 310 s
    "tests/web/test_api_fuzz.py",  # 302 s
    "tests/runner/fleet/test_fleet.py",  # 279 s
    "tests/web/test_sweeps_mock.py",  # 268 s
    "tests/web/test_sweeps.py",  # 265 s
    "tests/web/test_sweeps_cli.py",  # 187 s
    "tests/web/test_proxy_headers.py",  # 183 s
    "tests/runner/sweep/test_simulated.py",  # 182 s
    "tests/runner/test_face.py",  # 160 s
    "tests/web/test_supervision.py",  # 154 s
)


def part_group(nodeid: str) -> str:
    """The xdist work unit of a test: its file, or the group of the real part it shares."""
    path = nodeid.split("::", 1)[0]
    for prefix, group in PART_GROUPS:
        if path.startswith(prefix):
            return group
    return path


def longest_first(units: list[str]) -> list[str]:
    """`units` in the order they start: LONGEST_UNITS' order, then the others as given."""
    rank = {unit: place for place, unit in enumerate(LONGEST_UNITS)}
    return sorted(units, key=lambda unit: rank.get(unit, len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:
    """`--dist loadfile`, with the groups above as one unit each, the longest first (other
    modes as xdist has them)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class PartScheduling(LoadFileScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return part_group(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            # The queue is complete by the first assignment (xdist builds it, then assigns).
            if not self.ordered:
                self.ordered = True
                units = dict(self.workqueue)
                self.workqueue.clear()
                self.workqueue.update((unit, units[unit]) for unit in longest_first(list(units)))
            super()._assign_work_unit(node)

    return PartScheduling(config, log)
