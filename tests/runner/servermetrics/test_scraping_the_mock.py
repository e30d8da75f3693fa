"""Scraping over real sockets: the scraper against the built-in mock, and whole replays that
carry the server's figures (or say why not) in their snapshots and summary."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator

import httpx
import pytest

from runner import ListSink, parse_spec, run
from runner.cluster import ClusterConfig
from runner.mockserver import MockServerConfig, start_mock_server
from runner.servermetrics import ServerMetricsScraper, metrics_url_for


@pytest.fixture(scope="module")
def mock() -> Iterator[str]:
    # Scaled latency: requests stay running long enough for scrapes to see KV use and batches.
    config = MockServerConfig(cluster=ClusterConfig(workers=4, time_scale=0.05))
    with start_mock_server(config, process=True) as server:
        yield server.url


def _spec(url: str, *, duration_s: float = 2.5, **target: object):
    return parse_spec(
        {
            "workload": {"synthetic": {"trees": 8}},
            "concurrency": 8,
            "duration_s": duration_s,
            "speedup": 50,
            "snapshot_interval_s": 0.25,
            "target": {"kind": "endpoint", "url": url, "model": "mock-model", **target},
        }
    )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_metrics_url_defaults_to_the_endpoints_origin():
    assert metrics_url_for("http://h:8000/v1", None) == "http://h:8000/metrics"
    assert metrics_url_for("https://gw/route/v1/chat/completions", None) == "https://gw/metrics"
    assert metrics_url_for("http://h:8000", "http://h:9090/metrics") == "http://h:9090/metrics"
    assert metrics_url_for("http://h:8000", "off") is None


def test_the_scraper_reads_the_mocks_workers_while_requests_run(mock):
    lines: list[tuple[str, str]] = []

    async def scrape() -> dict:
        scraper = ServerMetricsScraper(
            f"{mock}/metrics", interval_s=0.05, log=lambda level, msg: lines.append((level, msg))
        )
        await scraper.start()
        body = {
            "model": "mock-model",
            "messages": [{"role": "user", "content": "hello " * 200}],
            "max_tokens": 200,
        }
        sent = 0
        async with httpx.AsyncClient(timeout=30) as client:
            # Batches until a few scrapes saw requests running (or a generous deadline).
            for _ in range(100):
                await asyncio.gather(
                    *(client.post(f"{mock}/v1/chat/completions", json=body) for _ in range(24))
                )
                sent += 24
                stats = scraper.books.summary()["figures"]
                if scraper.books.scrapes >= 4 and stats.get("running", {}).get("max"):
                    break
        view = scraper.latest()
        await scraper.stop()
        return {"summary": scraper.summary(), "view": view, "sent": sent}

    result = asyncio.run(scrape())
    summary, view, sent = result["summary"], result["view"], result["sent"]
    assert summary["available"] and summary["kind"] == "mock"
    assert summary["scrapes"] >= 4 and summary["failures"] == 0
    # The final scrape after the last answer completes the counters.
    assert summary["figures"]["requests_total"]["last"] == sent
    assert summary["figures"]["running"]["max"] > 0
    assert summary["workers"]["ids"] == ["0", "1", "2", "3"]
    assert sum(summary["workers"]["requests_total"]) == sent
    assert view["kind"] == "mock" and len(view["workers"]["kv_usage"]) == 4
    assert lines == [("info", lines[0][1])] and "mock at" in lines[0][1]


def test_a_replay_summary_and_its_snapshots_carry_the_servers_figures(mock):
    sink = ListSink()
    result = run(_spec(mock, metrics_interval_s=0.2), sink=sink)
    assert result.status == "succeeded"
    metrics = result.summary["server_metrics"]
    assert metrics["available"] and metrics["kind"] == "mock"
    assert metrics["url"] == f"{mock}/metrics"
    assert metrics["figures"]["kv_usage"]["max"] > 0
    assert metrics["workers"]["ids"] == ["0", "1", "2", "3"]
    assert len(metrics["workers"]["kv_usage"]) == 4
    # Every request the run sent reached a worker the server counted.
    assert metrics["figures"]["requests_total"]["last"] == result.summary["requests"]
    views = [s["server_metrics"] for s in sink.snapshots]
    assert all(v is not None and v["available"] for v in views)
    scraped = {v["t_s"] for v in views if v["t_s"] is not None}
    assert len(scraped) >= 5  # the live page gets a point per scrape
    assert all(len(v["workers"]["queue_depth"]) == 4 for v in views if v["workers"])
    assert json.dumps(result.summary)  # JSON all the way down


def test_a_server_without_metrics_leaves_the_run_alone_and_says_why(mock):
    sink = ListSink()
    # 1 s at a scrape every 0.2 s: five chances to warn again where 2.5 s at 2 s had two.
    result = run(
        _spec(mock, duration_s=1.0, metrics_url=f"{mock}/no-such-page", metrics_interval_s=0.2),
        sink=sink,
    )
    assert result.status == "succeeded" and result.summary["requests"] > 0
    metrics = result.summary["server_metrics"]
    assert metrics["available"] is False
    assert "HTTP 404" in metrics["reason"]
    warnings = [m for level, m in sink.lines if level == "warning" and "server metrics" in m]
    assert len(warnings) == 1 and "404" in warnings[0]
    assert sink.snapshots[-1]["server_metrics"] == {"available": False, "reason": metrics["reason"]}


def test_an_unreachable_metrics_host_is_one_warning_too(mock):
    sink = ListSink()
    url = f"http://127.0.0.1:{_closed_port()}/metrics"
    result = run(_spec(mock, duration_s=1.0, metrics_url=url, metrics_interval_s=0.2), sink=sink)
    assert result.status == "succeeded"
    assert "cannot connect" in result.summary["server_metrics"]["reason"]
    assert sum("server metrics" in m for _, m in sink.lines) == 1


def test_metrics_off_scrapes_nothing(mock):
    sink = ListSink()
    result = run(_spec(mock, duration_s=1.0, metrics_url="off"), sink=sink)
    assert result.summary["server_metrics"] == {
        "available": False,
        "reason": "turned off (metrics_url: off)",
        "url": None,
        "scrapes": 0,
        "failures": 0,
    }
    assert not any("server metrics" in m for _, m in sink.lines)
