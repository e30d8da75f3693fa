"""The run page's charts, declared once: the page's chart cells (templates/reports/_charts.html
loops over them), the browser's chart code (static/js/charts/view.js reads this list from the
page and finds each chart's traces and extractor by id in static/js/charts/catalog.js), the
offline export (the same template and list), and the history slimming (live/selectors.py keeps
in a slim sample exactly the snapshot fields the time-series charts read).

Why the declaration lives here rather than in a JSON file both sides read: the server must know
the fields before any browser asks (slimming a reconnect's history), it renders the chart cells,
and a Python list is type-checked and imported without a file lookup; the page gets it through
json_script like the rest of its data. A new chart is one entry here plus its entry in
catalog.js (its traces and how it reads a snapshot).
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class ChartSpec(TypedDict):
    id: str  # the element id and the key of its code in static/js/charts/catalog.js
    title: str
    y_title: str
    # series: grows by one point per sample (history and live); latest: redrawn whole from the
    # latest snapshot; compare: a series of the comparison page (one line per run)
    kind: Literal["series", "latest", "compare"]
    card: str  # the page section it sits in (templates/reports/_charts.html)
    # Snapshot fields it reads, dotted into nested objects ("client_workers.session_copies");
    # a series chart's fields are what a slim history sample keeps.
    reads: tuple[str, ...]
    # At most one redraw per this many seconds once the run has many client workers (dozens
    # of traces each); 0: every snapshot.
    redraw_s: float
    title_named: NotRequired[str]  # inference workers: the title when the server names them


# Run seconds and wall seconds of every sample: the x of every series, and the wall clock on
# hover (a simulated run's virtual seconds are not wall seconds).
TIME_FIELDS = ("t_s", "wall_s")
SLOW_S = 3.0
COUNTER_S = 2.0

CHARTS: tuple[ChartSpec, ...] = (
    # -- latency and throughput
    {"id": "chart-ttft", "title": "Latency percentiles per interval", "y_title": "ms",
     "kind": "series", "card": "latency", "reads": ("recent",), "redraw_s": 0},
    {"id": "chart-throughput", "title": "Requests per second, per interval",
     "y_title": "requests / s", "kind": "series", "card": "throughput", "reads": ("recent",),
     "redraw_s": COUNTER_S},
    {"id": "chart-tokens", "title": "Output tokens per second", "y_title": "tokens / s",
     "kind": "series", "card": "throughput", "reads": ("recent", "output_tokens_per_s"),
     "redraw_s": COUNTER_S},
    {"id": "chart-errors", "title": "Errors by category (cumulative)", "y_title": "errors",
     "kind": "series", "card": "throughput", "reads": ("errors", "errors_by_category"),
     "redraw_s": COUNTER_S},
    # -- client workers
    {"id": "chart-workers", "title": "Per client worker, now (x = worker id)", "y_title": "count",
     "kind": "latest", "card": "workers", "reads": ("client_workers",), "redraw_s": COUNTER_S},
    {"id": "chart-client-load", "title": "Client load: CPU and event-loop lag",
     "y_title": "% of a core", "kind": "series", "card": "client_load",
     "reads": ("client",), "redraw_s": COUNTER_S},
    {"id": "chart-orphans", "title": "Orphaned session copies (the leak)",
     "y_title": "orphaned copies", "kind": "series", "card": "copies",
     "reads": ("client_workers.orphaned_copies",), "redraw_s": SLOW_S},
    {"id": "chart-copies", "title": "Session copies per client worker", "y_title": "copies",
     "kind": "series", "card": "copies", "reads": ("client_workers.session_copies",),
     "redraw_s": SLOW_S},
    {"id": "chart-bytes", "title": "Cached history per client worker", "y_title": "MiB",
     "kind": "series", "card": "copies", "reads": ("client_workers.cached_bytes",),
     "redraw_s": SLOW_S},
    # -- migrations
    {"id": "chart-migration-total", "title": "Client-worker migrations (cumulative)",
     "y_title": "count", "kind": "series", "card": "migrations",
     "reads": ("routing.worker_switches", "routing.sessions_multi_worker"), "redraw_s": COUNTER_S},
    {"id": "chart-heatmap", "title": "Migrations from → to", "y_title": "to worker",
     "kind": "latest", "card": "heatmap", "reads": ("migrations", "migrations_total"),
     "redraw_s": SLOW_S},
    # -- the inference server and affinity
    {"id": "chart-inference", "title": "Requests, cached share and keys (x = worker)",
     "title_named": "Requests, cached share and keys (x = server id, last digits)",
     "y_title": "requests / keys", "kind": "latest", "card": "inference",
     "reads": ("inference_workers",), "redraw_s": COUNTER_S},
    {"id": "chart-affinity", "title": "Affinity events (cumulative)", "y_title": "events",
     "kind": "series", "card": "affinity", "reads": ("affinity",), "redraw_s": COUNTER_S},
    {"id": "chart-placement", "title": "Placement over the run (cumulative shares)",
     "y_title": "share", "kind": "series", "card": "placement", "reads": ("placement",),
     "redraw_s": COUNTER_S},
    # -- the endpoint's own /metrics
    {"id": "chart-sm-kv", "title": "KV-cache usage (thin: each server worker)",
     "y_title": "% of KV blocks", "kind": "series", "card": "server_metrics",
     "reads": ("server_metrics.t_s", "server_metrics.available", "server_metrics.figures",
               "server_metrics.workers.ids", "server_metrics.workers.kv_usage"),
     "redraw_s": 0},
    {"id": "chart-sm-queue",
     "title": "Queue depth and running requests (thin: each server worker)", "y_title": "requests",
     "kind": "series", "card": "server_metrics",
     "reads": ("server_metrics.t_s", "server_metrics.available", "server_metrics.figures",
               "server_metrics.workers.ids", "server_metrics.workers.queue_depth"),
     "redraw_s": 0},
    # -- the comparison page (static/js/compare.js): one line per run
    {"id": "cmp-ttft", "title": "TTFT p99, per interval", "y_title": "ms", "kind": "compare",
     "card": "compare", "reads": ("recent",), "redraw_s": 0},
    {"id": "cmp-throughput", "title": "Requests per second", "y_title": "req/s",
     "kind": "compare", "card": "compare", "reads": ("recent",), "redraw_s": 0},
    {"id": "cmp-orphans", "title": "Orphaned session copies (the leak)", "y_title": "copies",
     "kind": "compare", "card": "compare", "reads": ("routing.orphaned_session_copies",),
     "redraw_s": 0},
    {"id": "cmp-switches", "title": "Client-worker switches (cumulative)", "y_title": "switches",
     "kind": "compare", "card": "compare", "reads": ("routing.worker_switches",), "redraw_s": 0},
    {"id": "cmp-hit", "title": "Prefix-cache hit ratio (cumulative)", "y_title": "ratio",
     "kind": "compare", "card": "compare", "reads": ("prefix_cache_hit_ratio",), "redraw_s": 0},
    {"id": "cmp-latency", "title": "Latency p99, per interval", "y_title": "ms",
     "kind": "compare", "card": "compare", "reads": ("recent",), "redraw_s": 0},
)  # fmt: skip


def charts_in(card: str) -> list[ChartSpec]:
    return [c for c in CHARTS if c["card"] == card]


def charts_of_page(*, compare: bool = False) -> list[ChartSpec]:
    """The list a page's script receives: the run page's charts, or the comparison's."""
    return [c for c in CHARTS if (c["kind"] == "compare") == compare]


# A tree of the fields kept by a slim sample: {"recent": None (whole), "client_workers":
# {"session_copies": None, ...}, ...}.
SlimTree = dict[str, "SlimTree | None"]


def _slim_tree() -> SlimTree:
    tree: SlimTree = {}
    paths = [*TIME_FIELDS]
    for chart in CHARTS:
        if chart["kind"] != "latest":
            paths.extend(chart["reads"])
    for path in paths:
        node = tree
        parts = path.split(".")
        for i, part in enumerate(parts):
            if i == len(parts) - 1:
                node[part] = None  # whole, whatever was kept below it before
            else:
                child = node.get(part, {})
                if child is None:
                    break  # already kept whole
                node[part] = child
                node = child
    return tree


SLIM_FIELDS: SlimTree = _slim_tree()
