"""`python manage.py bench_live`: the live dashboard's figures (issue 8), printed, never judged.

1. snapshot size at 64 client workers and 64 inference workers: every snapshot of a simulated
   legacy run (real migrations), and the worst case (the 256 migration pairs a snapshot carries
   at most, every per-worker array full);
2. the run report of a one-million-request run: a run stored with 3,600 snapshots at 64+64
   workers and a 1M-request summary; server time of the report page (it reads the thinned
   series and the summary, never the records) and, in Chromium, time until its charts are drawn;
3. snapshot produced -> drawn in the browser, through the real channel layer (Redis when
   REDIS_URL is set): the producer stores and publishes snapshots the way the run sink does; the
   page notes when it drew each seq (both clocks are this machine's);
4. main-thread time per snapshot on the live page at 64 workers, while the page scrolls up and
   down through the charts (`--no-scroll`: parked at the latency charts; `--viewport tall`: every
   chart in view);
5. cancel: click on Cancel -> the page's badge says "cancelled", with a stand-in for the worker
   (the run watcher's own poll, then the final save), over the real channel layer.

`--verbose` adds each chart's draw time, the slowest snapshots with what they drew and each report
load's timeline (HTML received, script ran, history ingested, first frame, charts in view drawn);
`--profile FILE` records Chromium's CPU profile of the live part and prints where its time went.

The page is waited for with functions, never expression strings: the pages' Content-Security-
Policy refuses the eval Playwright would use for those.

Writes a team `bench-live` and its objects into the configured database and removes them at
the end. Needs Chromium (`--chromium`, default /usr/bin/chromium) and Playwright for 2-4.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection
from django.test import Client

from aiperf_web.runs.leaks import LeakPoint, LeakSeries, leak_assess, leak_brief
from aiperf_web.runs.models import Run, RunSample, Status
from aiperf_web.runs.publisher import publish_snapshot
from aiperf_web.scenarios.samples import SAMPLES
from aiperf_web.teams.models import Membership, Role, Team
from runner import ERROR_CATEGORIES, ListSink, parse_spec, run

ROOT = Path(settings.BASE_DIR)
TRACE = SAMPLES["claude-code-subagents"].path


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(_pct(values, 0.5), 2),
        "p95": round(_pct(values, 0.95), 2),
        "max": round(max(values), 2),
        "mean": round(statistics.fmean(values), 2),
    }


def simulated_snapshots(duration_s: float = 600) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    spec = parse_spec(
        {
            "workload": {"traces": [str(TRACE)]},
            "target": {"kind": "simulated", "workers": 64},
            "timing": "lanes",
            "concurrency": 256,
            "duration_s": duration_s,
            "start_window": [0.0, 1.0],
            "client_workers": 64,
            "policy": "legacy",
            "affinity": "dynamo-nvext",
            "scope": "lineage",
            "snapshot_interval_s": 1.0,
        }
    )
    sink = ListSink()
    result = run(spec, sink=sink)
    return [dict(s) for s in sink.snapshots], dict(result.summary)


def _recent(template: dict[str, Any], seq: int) -> list[dict[str, Any]]:
    """The template's latency points moved to end at `seq` (one per second)."""
    points = template["recent"][:5]
    return [dict(p, t_s=float(seq - len(points) + 1 + i)) for i, p in enumerate(points)]


def worst_case(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Every field at its widest: 256 migration pairs with 5-digit counts, per-worker arrays
    of large numbers, five full latency points, many error categories."""
    big = dict(snapshot)
    k = 64
    big["migrations"] = [[i % k, (i * 7 + 1) % k, 10_000 + i] for i in range(256)]
    big["migrations_total"] = 9_999_999
    workers = {key: [123_456 + i for i in range(k)] for key in snapshot["client_workers"]}
    workers["cached_bytes"] = [9_876_543_210 + i for i in range(k)]
    big["client_workers"] = workers
    big["inference_workers"] = {
        "ids": list(range(k)),
        "requests": [1_234_567 + i for i in range(k)],
        "cached_token_ratio": [0.9876 for _ in range(k)],
        "bound_keys": [12_345 for _ in range(k)],
    }
    point = {
        "t_s": 3599.0, "requests": 99_999, "errors": 9_999, "output_tokens": 9_999_999,
        **{m: {"p50": 1234.5678, "p90": 2345.6789, "p99": 3456.789}
           for m in ("ttft_ms", "itl_ms", "latency_ms")},
    }  # fmt: skip
    big["recent"] = [dict(point, t_s=3595.0 + i) for i in range(5)]
    # Every category the engine has at once: the most the chart and the message carry.
    big["errors_by_category"] = {c.value: 99_999 for c in ERROR_CATEGORIES}
    return big


class Command(BaseCommand):
    help = "Live dashboard benchmarks: snapshot size, report time, snapshot->drawn, main thread."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--chromium", default="/usr/bin/chromium")
        parser.add_argument("--snapshots", type=int, default=60, help="live snapshots sent")
        parser.add_argument("--rate", type=float, default=2.0, help="live snapshots per second")
        parser.add_argument("--samples", type=int, default=3600, help="stored samples (report)")
        parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
        parser.add_argument("--verbose", action="store_true", help="draw time per chart")
        parser.add_argument("--viewport", choices=("laptop", "tall"), default="laptop")
        parser.add_argument("--no-scroll", action="store_true", help="no scrolling (live part)")
        parser.add_argument("--cancels", type=int, default=5, help="cancel clicks timed")
        parser.add_argument("--loads", type=int, default=3, help="report page loads timed")
        parser.add_argument(
            "--profile", metavar="FILE", help="write a CPU profile of the live part (.cpuprofile) "
            "and print the functions with the most self time and the long tasks"
        )  # fmt: skip

    def handle(self, *args: Any, **opts: Any) -> None:
        # Playwright's sync API keeps an event loop on this thread; our ORM calls between its
        # steps are plain synchronous ones.
        os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        figures: dict[str, Any] = {}
        snapshots, summary = simulated_snapshots()
        sizes = [len(json.dumps(s, separators=(",", ":"))) for s in snapshots]
        template = max(snapshots, key=lambda s: len(s.get("migrations") or []))
        envelope = {
            "type": "snapshot",
            "run_id": "x" * 36,
            "seq": 999_999,
            "t_s": 3599.0,
            "data": worst_case(template),
            # Every worker leaking and growing: the most the leak verdict carries.
            "leak": leak_brief(
                leak_assess(
                    [
                        LeakPoint(
                            t_s=0.0, orphans=[0] * 64, copies=[0] * 64, cached_bytes=[0] * 64
                        ),
                        LeakPoint(
                            t_s=60.0,
                            orphans=[999] * 64,
                            copies=[9_999] * 64,
                            cached_bytes=[9_876_543_210] * 64,
                        ),
                    ]
                )
            ),
        }
        figures["snapshot_bytes_64x64"] = {
            "simulated_legacy_run": _summary([float(s) for s in sizes]),
            "worst_case": len(json.dumps(worst_case(template), separators=(",", ":"))),
            "message_envelope_worst_case": len(json.dumps(envelope, separators=(",", ":"))),
            "limit": 16_384,
        }
        team = Team.objects.create(name=f"bench-live-{os.getpid()}")
        user = User.objects.create_user(f"bench-live-{os.getpid()}", password=None)
        Membership.objects.create(team=team, user=user, role=Role.ADMIN)
        try:
            figures.update(self._browser_figures(team, user, template, summary, opts))
        finally:
            Run.objects.filter(team=team).delete()
            team.delete()
            user.delete()
        if opts["json"]:
            self.stdout.write(json.dumps(figures))
        else:
            for key, value in figures.items():
                self.stdout.write(f"{key}: {json.dumps(value)}")

    # -- the browser part ------------------------------------------------------------------------

    def _run(self, team: Team, user: User, status: str, **kw: Any) -> Run:
        return Run.objects.create(
            team=team, scenario_name="bench", endpoint_name="simulated cluster",
            target_kind="simulated", spec={"policy": "legacy", "scope": "lineage",
            "affinity": "dynamo-nvext", "client_workers": 64, "concurrency": 256,
            "snapshot_interval_s": 1.0}, status=status, created_by=user, **kw,
        )  # fmt: skip

    def _stored_run(
        self, team: Team, user: User, template: dict[str, Any], summary: dict[str, Any], n: int
    ) -> Run:
        big = dict(summary, requests=1_000_000)
        stored = self._run(team, user, Status.SUCCEEDED, summary=big, records_count=1_000_000)
        rows = []
        for seq in range(n):
            data = dict(template, t_s=float(seq), requests=seq * 278, progress=seq / n)
            data["recent"] = _recent(template, seq)
            rows.append(RunSample(run=stored, seq=seq, t_s=float(seq), data=data))
        RunSample.objects.bulk_create(rows, batch_size=500)
        Run.objects.filter(pk=stored.pk).update(samples_count=n)
        return stored

    def _browser_figures(
        self, team: Team, user: User, template: dict[str, Any], summary: dict[str, Any],
        opts: dict[str, Any],
    ) -> dict[str, Any]:  # fmt: skip
        from playwright.sync_api import sync_playwright

        from aiperf_web.core.mock import free_port

        figures: dict[str, Any] = {}
        stored = self._stored_run(team, user, template, summary, opts["samples"])
        client = Client()
        client.force_login(user)
        server_ms = []
        for _ in range(5):
            started = time.perf_counter()
            response = client.get(f"/runs/{stored.uuid}/")
            server_ms.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200
        figures["report_1m_requests"] = {
            "stored_samples": opts["samples"],
            "server_ms": _summary(server_ms),
            "page_bytes": len(response.content),
        }
        port = free_port()
        env = {**os.environ, "AIPERF_LOG_LEVEL": "WARNING"}
        env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "aiperf_web.asgi:application", "--port",
             str(port), "--log-level", "warning", "--no-access-log"], cwd=ROOT, env=env,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(100):
                try:
                    urllib.request.urlopen(f"{base}/health/", timeout=1)
                    break
                except OSError:
                    time.sleep(0.1)
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=opts["chromium"],
                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync", "--no-first-run"],
                )  # fmt: skip
                # "tall": every chart in view, every snapshot draws every chart (the worst
                # case); "laptop": 1366x768 scrolled to the latency charts, as a person sees it.
                tall = opts["viewport"] == "tall"
                ctx = browser.new_context(viewport={"width": 1366, "height": 7000 if tall else 768})
                ctx.add_cookies([{"name": settings.SESSION_COOKIE_NAME,
                                  "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                                  "url": base}])  # fmt: skip
                page = ctx.new_page()
                loads, timelines = [], []
                for _ in range(opts["loads"]):
                    started = time.perf_counter()
                    page.goto(f"{base}/runs/{stored.uuid}/")
                    page.wait_for_function("() => window.aiperfRun && aiperfRun.drawMs.length > 0")
                    loads.append((time.perf_counter() - started) * 1000)
                    # Where a load's time went (ms since navigation): the HTML received, the
                    # page's script ran, history ingested, first frame, slices, charts drawn.
                    timelines.append(page.evaluate(
                        "() => { const n = performance.getEntriesByType('navigation')[0];"
                        " const m = {response: n.responseEnd, dom: n.domInteractive,"
                        " ...aiperfRun.marks}; return Object.fromEntries("
                        "Object.entries(m).map(([k, v]) => [k, Math.round(v)])); }"
                    ))  # fmt: skip
                figures["report_1m_requests"]["browser_ready_ms"] = _summary(loads)
                figures["report_1m_requests"]["loads"] = [round(v) for v in loads]
                if opts["verbose"]:
                    for timeline in timelines:
                        self.stderr.write(f"  report load timeline (ms): {timeline}")
                figures.update(self._live(page, base, team, user, template, opts))
                figures.update(self._cancel(page, base, team, user, opts))
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=10)
        return figures

    def _live(
        self, page: Any, base: str, team: Team, user: User, template: dict[str, Any],
        opts: dict[str, Any],
    ) -> dict[str, Any]:  # fmt: skip
        live = self._run(team, user, Status.RUNNING)
        page.goto(f"{base}/runs/{live.uuid}/")
        page.wait_for_function("() => document.getElementById('live-state').textContent === 'live'")
        page.locator("#chart-ttft").scroll_into_view_if_needed()
        if not opts["no_scroll"]:
            # A person reading the page: 120 px wheel steps every 50 ms, down to the bottom and
            # back up (what makes charts enter and leave the view while snapshots arrive).
            page.evaluate(
                """() => { let dir = 1; window.benchScroll = setInterval(() => {
                    const max = document.documentElement.scrollHeight - innerHeight;
                    if (scrollY >= max - 2) dir = -1; else if (scrollY <= 2) dir = 1;
                    window.scrollBy(0, 120 * dir); }, 50); }"""
            )
        produced: dict[int, float] = {}
        interval = 1.0 / opts["rate"]

        def produce() -> None:
            # As the run sink does, on a thread of its own: store the sample, then publish it
            # with the leak verdict as of it (worked out once here, for every viewer).
            series = LeakSeries()
            try:
                for seq in range(opts["snapshots"]):
                    data = dict(template, t_s=float(seq), progress=seq / opts["snapshots"])
                    # A legacy run migrates all the time: the heatmap has news every snapshot.
                    data["migrations_total"] = template["migrations_total"] + seq
                    data["recent"] = _recent(template, seq)
                    produced[seq] = time.time() * 1000
                    RunSample.objects.create(run=live, seq=seq, t_s=float(seq), data=data)
                    series.add(float(seq), data)
                    publish_snapshot(
                        run_uuid=str(live.uuid),
                        seq=seq,
                        t_s=float(seq),
                        data=data,
                        leak=dict(series.brief()),
                    )
                    time.sleep(max(0.0, interval - (time.time() * 1000 - produced[seq]) / 1000))
            finally:
                connection.close()

        cdp = None
        if opts.get("profile"):
            # Chromium's sampling profiler over the live part: where the main thread's time goes.
            cdp = page.context.new_cdp_session(page)
            cdp.send("Profiler.enable")
            cdp.send("Profiler.setSamplingInterval", {"interval": 200})
            cdp.send("Profiler.start")
        producer = threading.Thread(target=produce, name="bench-producer")
        producer.start()
        last = opts["snapshots"] - 1
        page.wait_for_function(
            f"() => aiperfRun.view.lastSeq >= {last} && aiperfRun.drawnAt[{last}] !== undefined",
            timeout=120_000,
        )
        producer.join()
        page.evaluate("() => clearInterval(window.benchScroll)")
        if cdp is not None:
            profile = cdp.send("Profiler.stop")["profile"]
            Path(opts["profile"]).write_text(json.dumps(profile))
            self._print_profile(profile)
        probe = page.evaluate(
            "() => ({drawnAt: aiperfRun.drawnAt, drawMs: aiperfRun.drawMs, "
            "ingestMs: aiperfRun.ingestMs, costs: aiperfRun.costs, frameMs: aiperfRun.frameMs})"
        )
        if opts["verbose"]:
            names = sorted({k for c in probe["costs"][1:] for k in c})
            for name in names:
                values = [c[name] for c in probe["costs"][1:] if name in c]
                self.stderr.write(f"  draw {name}: {_summary(values)}")
            # The slowest snapshots, and what each of them drew (ms per chart).
            slowest = sorted(
                zip(probe["drawMs"][1:], probe["costs"][1:], strict=False), key=lambda p: -p[0]
            )[:6]
            for total, cost in slowest:
                ordered = sorted(cost.items(), key=lambda kv: -kv[1])
                parts = ", ".join(f"{k} {v:.1f}" for k, v in ordered)
                self.stderr.write(f"  slow snapshot {total:.1f} ms: {parts}")
        latencies = [probe["drawnAt"][str(s)] - t for s, t in produced.items()
                     if str(s) in probe["drawnAt"]]  # fmt: skip
        # The first message is the history; then one message per snapshot. drawMs: the
        # frames' drawing until that snapshot was drawn (a frame draws at most ~12 ms of
        # charts, then yields).
        ingest, draw = probe["ingestMs"][1:], probe["drawMs"][1:]
        per_snapshot = [a + b for a, b in zip(ingest, draw, strict=False)]
        frames = probe["frameMs"][1:]
        channel = str(settings.CHANNEL_LAYERS["default"]["BACKEND"]).rsplit(".", 1)[-1]
        return {
            "snapshot_to_drawn_ms": {"channel_layer": channel, "rate_per_s": opts["rate"],
                                     **_summary(latencies)},
            "main_thread_ms_per_snapshot_64_workers": {
                "viewport": opts["viewport"],
                "scrolling": not opts["no_scroll"],
                "ingest_plus_draw": _summary(per_snapshot),
                "ingest": _summary(ingest),
                "draw": _summary(draw),
                "longest_frame_ms": round(max(frames), 1) if frames else None,
            },
        }  # fmt: skip

    def _print_profile(self, profile: dict[str, Any]) -> None:
        """Self time per function (name, file, line), the top 30, from a CDP CPU profile."""
        nodes = {n["id"]: n for n in profile["nodes"]}
        deltas = profile.get("timeDeltas") or []
        self_us: dict[int, float] = {}
        for node_id, delta in zip(profile.get("samples") or [], [*deltas[1:], 0], strict=False):
            self_us[node_id] = self_us.get(node_id, 0.0) + delta
        by_fn: dict[str, float] = {}
        for node_id, us in self_us.items():
            frame = nodes[node_id]["callFrame"]
            url = frame.get("url", "").rsplit("/", 1)[-1]
            name = frame.get("functionName") or "(anonymous)"
            key = f"{name} {url}:{frame.get('lineNumber', 0) + 1}"
            by_fn[key] = by_fn.get(key, 0.0) + us
        total = sum(by_fn.values()) or 1.0
        self.stderr.write(f"  profile: {total / 1000:.0f} ms sampled")
        for key, us in sorted(by_fn.items(), key=lambda kv: -kv[1])[:30]:
            self.stderr.write(f"  {us / 1000:8.1f} ms {100 * us / total:5.1f} %  {key}")

    def _cancel(
        self, page: Any, base: str, team: Team, user: User, opts: dict[str, Any]
    ) -> dict[str, Any]:
        """Click Cancel on a running run's page until the badge says cancelled. The worker is
        stood in for by its own watcher (polls the row every _CANCEL_POLL_S) and final save,
        so the figure is the web's path plus the worker's poll, as in a real run."""
        from aiperf_web.runs.executing import _finish, _Watcher

        timings = []
        for _ in range(opts["cancels"]):
            running = self._run(team, user, Status.RUNNING)
            stop = threading.Event()
            watcher = _Watcher(run_pk=running.pk, stop=stop, limit_s=3600)

            def worker(run_obj: Run = running, stop: threading.Event = stop) -> None:
                try:
                    stop.wait(30)
                    _finish(run_obj=run_obj, status=Status.CANCELLED, reason="cancelled")
                finally:
                    connection.close()

            page.goto(f"{base}/runs/{running.uuid}/")
            page.wait_for_function(
                "() => document.getElementById('live-state').textContent === 'live'"
            )
            watcher.start()
            finisher = threading.Thread(target=worker, name="bench-cancel")
            finisher.start()
            started = time.perf_counter()
            page.click("#cancel")
            page.wait_for_function(
                "() => document.getElementById('status-badge').textContent.trim() === 'cancelled'"
            )
            timings.append((time.perf_counter() - started) * 1000)
            finisher.join()
            watcher.done.set()
            watcher.join()
        return {"cancel_click_to_cancelled_badge_ms": _summary(timings)}
