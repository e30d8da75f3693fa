"""The ceilings of a run specification that an operator may raise, read once from the environment.

Every numeric knob of a spec has an upper bound (a typo or a hostile launch must not book a
worker for a year or fill its memory). Most bounds are fixed where the knob is declared; the
few an operator may need to raise live here, one environment variable each, read when the
engine is imported (so the JSON Schema and every validation in a process agree). It never
validates anything itself and knows nothing of the web service.
"""

from __future__ import annotations

import os

__all__ = [
    "MAX_CLIENT_WORKERS",
    "MAX_CONCURRENCY",
    "MAX_DURATION_S",
    "MAX_RATE_PER_S",
    "MAX_REQUESTS",
    "MAX_SESSIONS_AT_ONCE",
    "MAX_SYNTHETIC_BLOCKS",
    "MAX_SYNTHETIC_REQUESTS",
]


def _env_number(name: str, default: int) -> int:
    """A positive whole number from `name`, else `default`. A bad value fails loudly at import:
    a ceiling silently left at its default would surprise the operator who set it."""
    raw = os.environ.get(name, "").strip().replace("_", "")
    if not raw:
        return default
    try:
        value = int(float(raw))
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if value < 1:
        raise ValueError(f"{name}={raw!r} must be 1 or more")
    return value


# A day of run time (live or simulated): a longer run is a mistake more often than a plan.
MAX_DURATION_S = _env_number("AIPERF_MAX_DURATION_S", 86_400)
# Lanes, or the cap on active trees: far beyond what one client process drives (a live run
# opens at most 4096 connections).
MAX_CONCURRENCY = _env_number("AIPERF_MAX_CONCURRENCY", 10_000)
# Stop after this many requests (and start at most this many trees): at the simulator's
# ~100k requests/s a quarter of an hour, and records the database can still hold.
MAX_REQUESTS = _env_number("AIPERF_MAX_REQUESTS", 100_000_000)
# Tree arrivals per second with timing rate.
MAX_RATE_PER_S = _env_number("AIPERF_MAX_RATE_PER_S", 10_000)
# Client workers: each holds its own session caches and appears in every snapshot.
MAX_CLIENT_WORKERS = _env_number("AIPERF_MAX_CLIENT_WORKERS", 1024)
# Prompt blocks (hash ids) the synthetic generator may hold for a whole workload, estimated
# before generating (SyntheticConfig.estimated_size, which errs high by 1.5-3x). Generated
# traces take ~11 bytes per block: the default keeps a workload under ~0.7 GB and its
# generation under a minute; the defaults' 32 trees are ~10.5 million.
MAX_SYNTHETIC_BLOCKS = _env_number("AIPERF_MAX_SYNTHETIC_BLOCKS", 100_000_000)
# Requests the synthetic generator may produce, estimated the same way: a workload of small
# prompts (a huge block_size) passes the block bound with any number of trees, and each
# generated request costs ~0.5 KB and ~20 µs whatever its prompt (5,000 trees of ~240
# requests: 17 s and 421 MB). The default keeps generation under ~30 s and ~1 GB.
MAX_SYNTHETIC_REQUESTS = _env_number("AIPERF_MAX_SYNTHETIC_REQUESTS", 2_000_000)
# Sessions a replay may hold live at once: lanes (closed timing too) times the sessions of the
# workload's largest tree, or that tree alone under rate and schedule timing. A fan-out tree
# starts every child at once on every lane, and the simulator then works through all those
# requests together (measured ~4,500 of them per wall second on one busy core): 20,000
# subagents on 16 lanes took 27 s and 470 MB before the first snapshot. The default keeps such a
# burst near ten seconds; recorded Claude Code trees hold tens of sessions, synthetic ones ~10.
MAX_SESSIONS_AT_ONCE = _env_number("AIPERF_MAX_SESSIONS_AT_ONCE", 50_000)
