"""The live channel over the real ASGI application (session auth, origin check, the real
channel layer: Redis in production, in-memory on the embedded default): who may connect,
history from the database then live messages with no gap and no duplicate, status pushes, the
runs-list feed, and a viewer who can watch but not cancel."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import Client
from django.utils import timezone

from aiperf_web.asgi import application
from aiperf_web.live.consumers import LIST_POLL_S, LIST_RECHECK_S, STATUS_RECHECK_S
from aiperf_web.runs import claiming, executing
from aiperf_web.runs import services as run_svc
from aiperf_web.runs.leaks import LeakSeries
from aiperf_web.runs.models import Run, RunSample, Status
from aiperf_web.runs.publisher import publish_snapshot
from tests.web.conftest import World
from tests.web.wsclient import WebsocketCommunicator

ORIGIN = (b"origin", b"http://127.0.0.1:8000")


def _cookie(world: World, persona: str) -> list[tuple[bytes, bytes]]:
    if persona == "anonymous":
        return [ORIGIN]
    client: Client = world.client(persona)
    session = client.cookies["sessionid"].value
    return [ORIGIN, (b"cookie", f"sessionid={session}".encode())]


def _cookies(world: World) -> dict[str, list[tuple[bytes, bytes]]]:
    return {p: _cookie(world, p) for p in ("anonymous", "owner", "teammate", "viewer", "outsider")}


def _snapshot(seq: int, *, orphans: list[int] | None = None) -> dict[str, Any]:
    orphans = orphans or [0, 0]
    return {
        "t_s": float(seq),
        "progress": seq / 100,
        "requests": 10 * seq,
        "recent": [{"t_s": float(seq), "requests": 10, "errors": 0, "output_tokens": 5,
                    "ttft_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0},
                    "itl_ms": {"p50": 1.0, "p90": 1.0, "p99": 1.0},
                    "latency_ms": {"p50": 5.0, "p90": 6.0, "p99": 7.0}}],
        "routing": {"orphaned_session_copies": sum(orphans), "worker_switches": 0},
        "client_workers": {"orphaned_copies": orphans, "session_copies": [1, 1],
                           "cached_bytes": [10, 10], "in_flight": [0, 0]},
        "migrations": [],
    }  # fmt: skip


_SERIES: dict[str, LeakSeries] = {}


def _store(
    run: Run, seq: int, *, publish: bool = True, team_uuid: str | None = None, **kw: Any
) -> None:
    """What the sink does: store the sample, then publish it with the leak verdict as of it."""
    data = _snapshot(seq, **kw)
    RunSample.objects.create(run=run, seq=seq, t_s=float(seq), data=data)
    series = _SERIES.setdefault(str(run.uuid), LeakSeries())
    series.add(float(seq), data)
    if publish:
        publish_snapshot(
            run_uuid=str(run.uuid),
            seq=seq,
            t_s=float(seq),
            data=data,
            leak=dict(series.brief()),
            team_uuid=team_uuid,
        )


def _running(world: World) -> Run:
    return Run.objects.create(
        team=world.team, scenario=world.scenario, scenario_name="alpha-scenario",
        endpoint=world.endpoint, endpoint_name="alpha-mock", target_kind="endpoint",
        spec=world.scenario.spec, status=Status.RUNNING,
    )  # fmt: skip


def run_async(body: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(body)()


def _connect(path: str, headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, path, headers=headers)


@pytest.mark.parametrize("persona,code", [("anonymous", 4401), ("outsider", 4404)])
def test_anonymous_and_outsider_websockets_on_a_run_are_refused(
    transactional_db: Any, mock_url: str, persona: str, code: int
) -> None:
    world = World(mock_url)
    cookies = _cookies(world)
    run = _running(world)

    async def body() -> None:
        ws = _connect(f"/ws/runs/{run.uuid}/", cookies[persona])
        connected, close_code = await ws.connect()
        assert not connected and close_code == code
        await ws.disconnect()

    run_async(body)


def test_the_runs_list_socket_refuses_anonymous(transactional_db: Any, mock_url: str) -> None:
    world = World(mock_url)
    cookies = _cookies(world)

    async def body() -> None:
        ws = _connect("/ws/runs/", cookies["anonymous"])
        connected, close_code = await ws.connect()
        assert not connected and close_code == 4401
        await ws.disconnect()

    run_async(body)


def test_a_foreign_origin_is_refused(transactional_db: Any, mock_url: str) -> None:
    world = World(mock_url)
    cookies = _cookies(world)
    run = _running(world)
    headers = [h for h in cookies["owner"] if h[0] != b"origin"]
    headers.append((b"origin", b"http://evil.example"))

    async def body() -> None:
        ws = _connect(f"/ws/runs/{run.uuid}/", headers)
        connected, _ = await ws.connect()
        assert not connected
        await ws.disconnect()

    run_async(body)


def test_an_unknown_or_malformed_run_id_is_refused_like_an_outsider(
    transactional_db: Any, mock_url: str
) -> None:
    world = World(mock_url)
    cookies = _cookies(world)

    async def body() -> None:
        for rid in ("00000000-0000-0000-0000-000000000000", "not-a-uuid", str(world.run.pk)):
            ws = _connect(f"/ws/runs/{rid}/", cookies["owner"])
            connected, code = await ws.connect()
            assert not connected and code == 4404
            await ws.disconnect()

    run_async(body)


def test_a_late_joiner_gets_the_history_then_live_samples_with_no_gap_and_no_duplicate(
    transactional_db: Any, mock_url: str
) -> None:
    world = World(mock_url)
    cookies = _cookies(world)
    run = _running(world)
    for seq in range(5):
        _store(run, seq, publish=False)
    store = sync_to_async(_store)

    async def body() -> None:
        # A page that already holds seq 0..1 resumes after 1.
        ws = _connect(f"/ws/runs/{run.uuid}/?after=1", cookies["teammate"])
        connected, _ = await ws.connect()
        assert connected
        history = await ws.receive_json_from(timeout=5)
        assert history["type"] == "history"
        assert [s["seq"] for s in history["samples"]] == [2, 3, 4]
        assert history["latest"]["seq"] == 4 and history["last_seq"] == 4
        assert history["status"] == "running"

        await store(run, 5)
        live = await ws.receive_json_from(timeout=5)
        assert (live["type"], live["seq"], live["run_id"]) == ("snapshot", 5, str(run.uuid))
        assert live["data"]["requests"] == 50 and live["leak"]["level"] == "ok"

        # A duplicate publish of 5 is dropped; 6 stored but its message lost: 7 brings both.
        await sync_to_async(publish_snapshot)(
            run_uuid=str(run.uuid), seq=5, t_s=5.0, data=_snapshot(5)
        )
        await store(run, 6, publish=False)
        await store(run, 7, orphans=[3, 0])
        got = [await ws.receive_json_from(timeout=5) for _ in range(2)]
        assert [m["seq"] for m in got] == [6, 7]
        # The writer's verdict rides with its own snapshot; 6, filled in from the database,
        # carries none (the page keeps the one it has).
        assert got[0]["leak"] is None
        assert got[1]["leak"]["level"] == "growing" and got[1]["leak"]["leaking_workers"] == [0]
        assert await ws.receive_nothing(timeout=0.5)
        await ws.disconnect()

        # A reconnect from scratch gets everything, whole history, in order.
        ws = _connect(f"/ws/runs/{run.uuid}/", cookies["owner"])
        await ws.connect()
        history = await ws.receive_json_from(timeout=5)
        assert [s["seq"] for s in history["samples"]] == list(range(8))
        # Slim history samples: the latency point of each interval once.
        assert sum(len(s["data"]["recent"]) for s in history["samples"]) == 8
        assert "migrations" not in history["samples"][0]["data"]
        await ws.disconnect()

    run_async(body)


# Redis's read timeout: on the embedded default's in-memory layer there is none to outlast.
@pytest.mark.shape_independent
def test_an_idle_socket_stays_open_past_the_redis_read_timeout(
    transactional_db: Any, mock_url: str
) -> None:
    """redis-py 8 reads with a 5 s timeout unless told otherwise; channels-redis blocks 5 s on
    an idle channel, so a consumer with nothing to send used to die (settings.CHANNEL_LAYERS)."""
    world = World(mock_url)
    cookies = _cookies(world)
    run = _running(world)

    async def body() -> None:
        ws = _connect(f"/ws/runs/{run.uuid}/", cookies["owner"])
        connected, _ = await ws.connect()
        assert connected
        assert (await ws.receive_json_from(timeout=5))["type"] == "history"
        assert await ws.receive_nothing(timeout=7.0)
        await sync_to_async(_store)(run, 0)
        assert (await ws.receive_json_from(timeout=5))["seq"] == 0
        await ws.disconnect()

    run_async(body)


def test_the_status_change_and_new_log_lines_are_pushed(
    transactional_db: Any, mock_url: str
) -> None:
    world = World(mock_url)
    cookies = _cookies(world)
    run = _running(world)

    async def body() -> None:
        ws = _connect(f"/ws/runs/{run.uuid}/", cookies["viewer"])
        connected, _ = await ws.connect()
        assert connected
        assert (await ws.receive_json_from(timeout=5))["type"] == "history"
        await sync_to_async(executing.run_log)(run_obj=run, level="warning", message="no cached")
        await sync_to_async(_store)(run, 0, publish=False)
        # The worker stopped beating: the reaper fails the run, and says so on the channel.
        await sync_to_async(Run.objects.filter(pk=run.pk).update)(
            heartbeat_at=timezone.now() - timedelta(hours=1)
        )
        await sync_to_async(claiming.runs_reap_stale)(older_than_s=60)
        seen: dict[str, Any] = {}
        while "status" not in seen:
            # Well under the consumer's own re-check of the row: these arrive pushed.
            msg = await ws.receive_json_from(timeout=STATUS_RECHECK_S / 3)
            seen[msg["type"]] = msg
        assert seen["log"]["lines"][0]["message"] == "no cached"
        # The sample stored before the final status arrives before it.
        assert seen["snapshot"]["seq"] == 0
        status = seen["status"]
        assert status["status"] == "failed" and "stopped responding" in status["reason"]
        assert status["finished_at"] is not None
        await ws.disconnect()

    run_async(body)


def test_a_queued_runs_page_hears_it_start_and_be_cancelled(
    transactional_db: Any, mock_url: str
) -> None:
    world = World(mock_url)
    cookies = _cookies(world)
    run = _running(world)
    Run.objects.filter(pk=run.pk).update(status=Status.QUEUED)

    async def body() -> None:
        ws = _connect(f"/ws/runs/{run.uuid}/", cookies["teammate"])
        connected, _ = await ws.connect()
        assert connected
        history = await ws.receive_json_from(timeout=5)
        assert (history["status"], history["started_at"]) == ("queued", None)
        assert await sync_to_async(claiming.run_claim)(run_uuid=str(run.uuid), worker="w1")
        started = await ws.receive_json_from(timeout=STATUS_RECHECK_S / 3)
        assert (started["type"], started["status"]) == ("status", "running")
        assert started["started_at"] is not None and not started["cancel_requested"]
        await sync_to_async(run_svc.run_cancel)(actor=world.owner, run_obj=run)
        asked = await ws.receive_json_from(timeout=STATUS_RECHECK_S / 3)
        assert (asked["status"], asked["cancel_requested"]) == ("running", True)
        await ws.disconnect()

    run_async(body)


def test_a_bad_client_message_gets_an_error_not_a_crash(
    transactional_db: Any, mock_url: str
) -> None:
    world = World(mock_url)
    cookies = _cookies(world)

    async def body() -> None:
        ws = _connect(f"/ws/runs/{world.run.uuid}/?after=zz", cookies["owner"])
        connected, _ = await ws.connect()
        assert connected
        first = await ws.receive_json_from(timeout=5)
        assert first == {"type": "error", "message": "after: an integer seq"}
        assert (await ws.receive_json_from(timeout=5))["type"] == "history"
        await ws.send_to(text_data="{not json")
        assert (await ws.receive_json_from(timeout=5))["type"] == "error"
        await ws.send_json_to({"type": "ping"})
        assert (await ws.receive_json_from(timeout=5))["type"] == "pong"
        await ws.disconnect()

    run_async(body)


def test_a_viewer_can_watch_but_not_cancel(transactional_db: Any, mock_url: str) -> None:
    world = World(mock_url)
    cookies = _cookies(world)
    run = _running(world)

    async def body() -> None:
        ws = _connect(f"/ws/runs/{run.uuid}/", cookies["viewer"])
        connected, _ = await ws.connect()
        assert connected
        assert (await ws.receive_json_from(timeout=5))["type"] == "history"
        await ws.disconnect()

    run_async(body)
    page = world.client("viewer").get(f"/runs/{run.uuid}/")
    assert page.status_code == 200 and b'id="cancel"' not in page.content
    assert world.client("teammate").get(f"/runs/{run.uuid}/").content.count(b'id="cancel"') == 1
    assert world.client("viewer").post(f"/runs/{run.uuid}/cancel/").status_code == 403
    assert world.api("viewer").post(f"/api/v1/runs/{run.uuid}/cancel").status_code == 403
    run.refresh_from_db()
    assert run.status == Status.RUNNING and run.cancel_requested_at is None


def test_the_runs_list_feed_sends_progress_and_the_leak_flag_of_active_runs(
    transactional_db: Any, mock_url: str
) -> None:
    world = World(mock_url)
    cookies = _cookies(world)
    run = _running(world)
    _store(run, 3, publish=False, orphans=[2, 1])

    async def body() -> None:
        ws = _connect("/ws/runs/", cookies["viewer"])
        connected, _ = await ws.connect()
        assert connected
        msg = await ws.receive_json_from(timeout=5)
        assert msg["type"] == "runs"
        row = next(r for r in msg["rows"] if r["id"] == str(run.uuid))
        assert row["status"] == "running" and row["progress"] == 0.03
        assert row["requests"] == 30 and row["orphaned"] == 3 and row["leak"] is True
        # Unchanged rows are not sent again, and a quiet list is not re-read: a row changed in
        # the database without a word on the channel waits for the slow re-check.
        await sync_to_async(_store)(run, 4, publish=False)
        assert await ws.receive_nothing(timeout=LIST_POLL_S * 2)
        # A run's snapshot, published as the sink does (with its team), nudges the list.
        await sync_to_async(_store)(run, 5, team_uuid=str(world.team.uuid))
        msg = await ws.receive_json_from(timeout=LIST_RECHECK_S / 3)
        assert [r["progress"] for r in msg["rows"] if r["id"] == str(run.uuid)] == [0.05]
        # A status change is pushed too (here the reaper's).
        await sync_to_async(Run.objects.filter(pk=run.pk).update)(
            heartbeat_at=timezone.now() - timedelta(hours=1)
        )
        await sync_to_async(claiming.runs_reap_stale)(older_than_s=60)
        msg = await ws.receive_json_from(timeout=LIST_RECHECK_S / 3)
        assert [r["status"] for r in msg["rows"] if r["id"] == str(run.uuid)] == ["failed"]
        await ws.disconnect()

        ws = _connect("/ws/runs/", cookies["outsider"])
        await ws.connect()
        assert await ws.receive_nothing(timeout=2.0)
        await ws.disconnect()

    run_async(body)


def test_the_sink_publishes_its_leak_verdict_with_each_snapshot_once_for_every_viewer(
    transactional_db: Any, mock_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer works the verdict out (runs/sink.py's LeakSeries), not each viewer's socket:
    the group message carries it, so N viewers cost one verdict per snapshot."""
    from channels.layers import get_channel_layer

    from aiperf_web.runs import sink as sink_module
    from aiperf_web.runs.messages import run_group

    # Every stored sample published (not at most one a wall second): each one's verdict seen.
    monkeypatch.setattr(sink_module, "_PUBLISH_GAP_S", 0.0)

    world = World(mock_url)
    run = _running(world)
    layer = get_channel_layer()
    assert layer is not None
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(run_group(run.uuid), channel)
    sink = sink_module.RunSink(run=run, stop=threading.Event())
    for seq in range(4):  # orphans on worker 1 from the third snapshot on
        sink.snapshot(_snapshot(seq, orphans=[0, 2 * max(0, seq - 1)]))  # type: ignore[arg-type]
    sink.close()
    events = []
    while True:
        try:
            events.append(async_to_sync(_receive)(layer, channel))
        except TimeoutError:
            break
    snapshots = [e for e in events if e["type"] == "run.snapshot"]
    # The first and the last are always stored (one between may be overtaken by the next).
    assert len(snapshots) >= 2 and snapshots[-1]["data"]["t_s"] == 3.0
    assert all(e["leak"] is not None for e in snapshots)
    assert snapshots[0]["leak"]["level"] == "ok"
    last = snapshots[-1]["leak"]
    assert last["level"] in ("leak", "growing") and last["orphaned"] == 4
    assert last["leaking_workers"] == [1]


async def _receive(layer: Any, channel: str) -> dict[str, Any]:
    return dict(await asyncio.wait_for(layer.receive(channel), timeout=2))
