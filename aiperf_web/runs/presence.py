"""Which workers consume a Celery queue now, and with how many slots (pool processes).

Each worker's consumer writes its presence every PRESENCE_BEAT_S from its own event loop
(aiperf_web/celery.py, WorkerPresence): a worker whose consumer stopped (a lost broker it has
not reconnected to, a crashed consumer, a main process only waiting for its last run before
it exits) stops being seen even while its process lives, which a run heartbeat or a live
process would not say. Kept in Django's cache: Redis in production, shared by every web and
worker process; process memory in the embedded shape, where the worker is a thread of the web
process. Read by /healthz (ops.health) and by a queued run's explanation (runs.line).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache

PRESENCE_BEAT_S = 5.0
# Entries of workers gone this long are dropped at the next write.
_KEEP_S = 3600.0


@dataclass(frozen=True)
class Presence:
    worker: str  # the Celery node name (celery@host)
    slots: int
    age_s: float  # since its last beat


def _key(queue: str) -> str:
    return f"workers-on:{queue}"


def presence_beat(*, worker: str, queues: Iterable[str], slots: int) -> None:
    """This worker consumes `queues` with `slots` pool processes, now. One cache entry per
    queue maps worker names to their last beat; two workers writing at once may drop one
    beat of the other (read, update, write), which the next beat restores."""
    now = time.time()
    for queue in queues:
        seen: dict[str, dict[str, Any]] = cache.get(_key(queue)) or {}
        seen = {name: e for name, e in seen.items() if now - e["at"] < _KEEP_S}
        seen[worker] = {"slots": slots, "at": now}
        cache.set(_key(queue), seen, timeout=_KEEP_S)


def workers_seen(queue: str, *, within_s: float) -> list[Presence]:
    """The workers that consumed `queue` within the last `within_s` seconds, the freshest
    first. Raises what the cache raises when it cannot be read (Redis away)."""
    now = time.time()
    seen: dict[str, dict[str, Any]] = cache.get(_key(queue)) or {}
    found = [
        Presence(worker=name, slots=int(e["slots"]), age_s=max(0.0, now - e["at"]))
        for name, e in seen.items()
        if now - e["at"] <= within_s
    ]
    return sorted(found, key=lambda p: p.age_s)


def last_seen_s(queue: str) -> float | None:
    """Seconds since any worker consumed `queue` (in the last hour), or None."""
    now = time.time()
    seen: dict[str, dict[str, Any]] = cache.get(_key(queue)) or {}
    return min((max(0.0, now - e["at"]) for e in seen.values()), default=None)
