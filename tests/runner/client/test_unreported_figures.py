"""An endpoint that reports no cached tokens (or no usage): the run says so once and marks
the figures unavailable in the summary, instead of reporting 0 or leaving them out silently."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from runner import ListSink, parse_spec, run_async

if TYPE_CHECKING:
    from .conftest import Received, Reply, Wire

MODELS = {"object": "list", "data": [{"id": "m"}]}


def _run(wire: Wire, *, usage: bool) -> tuple[dict, ListSink]:
    async def handler(request: Received, reply: Reply) -> None:
        if request.path == "/v1/models":
            await reply.send(wire.json_response(200, MODELS))
            return
        events = [wire.delta("ok", finish="length")]
        if usage:
            events.append(wire.usage(12, 1))  # no prompt_tokens_details.cached_tokens
        await reply.send(wire.stream(*events, wire.DONE))

    async def main() -> tuple[dict, ListSink]:
        async with wire.serve(handler) as server:
            spec = parse_spec(
                {
                    "workload": {"synthetic": {"trees": 2}},
                    "concurrency": 2,
                    "max_requests": 6,
                    "speedup": 1000.0,
                    # Scraping off: this server answers every path with a stream.
                    "target": {
                        "kind": "endpoint",
                        "url": server.url,
                        "model": "m",
                        "metrics_url": "off",
                    },
                }
            )
            sink = ListSink()
            result = await run_async(spec, sink=sink)
            return dict(result.summary), sink

    return asyncio.run(main())


def test_without_cached_tokens_the_hit_ratio_is_marked_unavailable_and_said_once(wire: Wire):
    summary, sink = _run(wire, usage=True)
    assert summary["requests"] == 6 and summary["errors"] == 0
    assert summary["prefix_cache_hit_ratio"] is None
    assert "cached_tokens" in summary["unavailable"]["prefix_cache_hit_ratio"]
    assert "output_tokens" not in summary["unavailable"]
    warnings = [message for level, message in sink.lines if level == "warning"]
    assert warnings == [
        f"prefix_cache_hit_ratio unavailable: {summary['unavailable']['prefix_cache_hit_ratio']}"
    ]


def test_without_usage_output_tokens_are_counted_from_chunks_and_marked(wire: Wire):
    summary, sink = _run(wire, usage=False)
    assert set(summary["unavailable"]) == {"prefix_cache_hit_ratio", "output_tokens"}
    assert len([1 for level, _ in sink.lines if level == "warning"]) == 2
