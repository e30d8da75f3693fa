"""What crosses Redis between a run's orchestrator and its client-worker hosts.

Keys of one run (all under `aiperf:fleet:<run>:`):

    credits:<w>   a stream per client worker: the requests it must send, one entry per
                  orchestrator tick (consumer group `hosts`; an entry is acknowledged when the
                  results of all its credits are pushed), and control entries
    returns       one list: results, pushed by hosts in batches, popped by the orchestrator
    hb:<w>        the host's heartbeat: a JSON object refreshed every HEARTBEAT_S, expiring
                  after HEARTBEAT_TTL_S, so a missing key means a host that stopped answering

A credit carries the request already built (body bytes as the server will see them,
path, per-request headers): hosts need neither the trace nor the routing, so the engine's
decisions stay in one process and a host is a pool of HTTP connections with session caches.
Times in results are wall-clock seconds (`time.time()` based, taken with the host's monotonic
clock): hosts on one machine agree to the microsecond, hosts on several to NTP's precision.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from runner.client import ResponseResult
from runner.errors import ErrorCategory

__all__ = [
    "CONTROL_CANCEL",
    "CONTROL_STOP",
    "GROUP",
    "HEARTBEAT_S",
    "HEARTBEAT_TTL_S",
    "CreditEntry",
    "RunKeys",
    "decode_credits",
    "decode_result",
    "encode_credits",
    "encode_result",
]

GROUP: Final = "hosts"
HEARTBEAT_S: Final = 0.5
# A host silent this long is lost: several missed beats, so a busy loop's jitter is not a loss.
HEARTBEAT_TTL_S: Final = 5.0
CONTROL_STOP: Final = b"stop"  # the run is over: finish, report and leave
CONTROL_CANCEL: Final = b"cancel"  # these credit ids were cancelled by the orchestrator


@dataclass(frozen=True, slots=True)
class RunKeys:
    run: str

    @property
    def prefix(self) -> str:
        return f"aiperf:fleet:{self.run}:"

    def credits(self, worker: int) -> str:
        return f"{self.prefix}credits:{worker}"

    @property
    def returns(self) -> str:
        return f"{self.prefix}returns"

    def heartbeat(self, worker: int) -> str:
        return f"{self.prefix}hb:{worker}"


@dataclass(frozen=True, slots=True)
class CreditEntry:
    """One request for a host to send. `session_end`: this is the session's last turn, so
    the host frees its copy of the history once it is answered (copies it holds of sessions
    whose later turns went elsewhere stay: that is the leak legacy routing causes)."""

    id: int
    session_id: str
    session_end: bool
    path: str
    body: bytes
    headers: dict[str, str]


def encode_credits(entries: Sequence[CreditEntry]) -> dict[bytes, bytes]:
    """A tick's credits for one worker as one stream entry with one field: per credit, a JSON
    line (id, session, last turn, path, headers, body length), then the body as is. Redis's
    client packs and parses every entry and field in Python: one entry per tick instead of six
    fields per credit is most of what the orchestrator's and the hosts' busiest loops cost."""
    parts: list[bytes] = []
    for entry in entries:
        head = json.dumps(
            [
                entry.id,
                entry.session_id,
                entry.session_end,
                entry.path,
                entry.headers,
                len(entry.body),
            ],
            separators=(",", ":"),
        )
        parts += (head.encode(), b"\n", entry.body)
    return {b"m": b"".join(parts)}


def decode_credits(fields: dict[bytes, bytes]) -> list[CreditEntry]:
    data = fields[b"m"]
    credits: list[CreditEntry] = []
    at = 0
    while at < len(data):
        # JSON never holds a raw newline: the first one ends the head.
        end = data.index(b"\n", at)
        credit_id, session_id, session_end, path, headers, size = json.loads(data[at:end])
        at = end + 1 + size
        credits.append(
            CreditEntry(
                id=credit_id,
                session_id=session_id,
                session_end=session_end,
                path=path,
                body=data[end + 1 : at],
                headers=headers,
            )
        )
    return credits


def encode_result(credit_id: int, result: ResponseResult, wall_offset_s: float) -> bytes:
    """`wall_offset_s` turns the host's monotonic times into wall-clock times. Chunk arrival
    times travel as first, last and count: all the orchestrator derives from them is the mean
    inter-token latency, and a long answer's every chunk time would dominate the message."""
    chunks = result.chunk_times_s
    body: list[Any] = [
        credit_id,
        result.start_s + wall_offset_s,
        result.end_s + wall_offset_s,
        None if result.first_token_s is None else result.first_token_s + wall_offset_s,
        [chunks[0] + wall_offset_s, chunks[-1] + wall_offset_s, len(chunks)] if chunks else None,
        result.output_tokens,
        result.prompt_tokens,
        result.cached_tokens,
        result.served_by,
        result.status,
        None if result.error is None else str(result.error),
        result.error_detail,
        result.finish_reason,
    ]
    return json.dumps(body, separators=(",", ":")).encode()


def decode_result(data: bytes, wall_offset_s: float) -> tuple[int, ResponseResult]:
    """The inverse of `encode_result`, onto the orchestrator's monotonic clock (wall-clock
    time minus `wall_offset_s`)."""
    (
        credit_id,
        start,
        end,
        first,
        chunks,
        output_tokens,
        prompt_tokens,
        cached_tokens,
        served_by,
        status,
        error,
        detail,
        finish,
    ) = json.loads(data)
    chunk_times: tuple[float, ...] = ()
    if chunks is not None:
        lo, hi, count = chunks
        lo -= wall_offset_s
        hi -= wall_offset_s
        # Evenly spread between the first and last arrival: the same count and mean gap.
        step = (hi - lo) / (count - 1) if count > 1 else 0.0
        chunk_times = tuple(lo + step * i for i in range(count))
    return credit_id, ResponseResult(
        start_s=start - wall_offset_s,
        end_s=end - wall_offset_s,
        first_token_s=None if first is None else first - wall_offset_s,
        chunk_times_s=chunk_times,
        output_tokens=output_tokens,
        prompt_tokens=prompt_tokens,
        cached_tokens=cached_tokens,
        served_by=served_by,
        status=status,
        error=None if error is None else ErrorCategory(error),
        error_detail=detail,
        finish_reason=finish,
    )
