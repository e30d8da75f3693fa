"""Small builders for the cluster tests: requests, chained keys and session_control bodies."""

from __future__ import annotations

import itertools
from typing import Any

from runner.cluster import Cluster, ClusterConfig, ClusterRequest, Placement, Rejection
from runner.cluster.keys import chain_block_keys

_ids = itertools.count(1)

BLOCK = 64  # the default block size, in tokens


def blocks(n: int, start: int = 0) -> tuple[int, ...]:
    """Chained keys of `n` blocks whose contents are start, start+1, ..."""
    return chain_block_keys(range(start, start + n))


def request(
    keys: tuple[int, ...] = (),
    *,
    prompt_tokens: int | None = None,
    output_tokens: int = 1,
    control: object = None,
    header: str | None = None,
    parent: str | None = None,
    request_id: str | None = None,
) -> ClusterRequest:
    """A request whose prompt is exactly its full blocks plus one token (so every block can
    hit), unless `prompt_tokens` says otherwise."""
    return ClusterRequest(
        request_id=request_id or f"r{next(_ids)}",
        block_keys=keys,
        prompt_tokens=len(keys) * BLOCK + 1 if prompt_tokens is None else prompt_tokens,
        output_tokens=output_tokens,
        session_control=control,
        session_header=header,
        parent_session_header=parent,
    )


def cluster(**config: Any) -> Cluster:
    return Cluster(ClusterConfig(**config))


def placed(result: Placement | Rejection) -> Placement:
    assert isinstance(result, Placement), result
    return result


def rejected(result: Placement | Rejection) -> Rejection:
    assert isinstance(result, Rejection), result
    return result


def bind(session_id: str, timeout: int | None = None) -> dict[str, object]:
    body: dict[str, object] = {"session_id": session_id, "action": "bind"}
    if timeout is not None:
        body["timeout"] = timeout
    return body


def open_(session_id: str, timeout: int | None = None) -> dict[str, object]:
    return {**bind(session_id, timeout), "action": "open"}


def close(session_id: str) -> dict[str, object]:
    return {"session_id": session_id, "action": "close"}


def follow(session_id: str) -> dict[str, object]:
    return {"session_id": session_id}


def workers_of(c: Cluster, requests: list[ClusterRequest], now_s: float = 0.0) -> list[int]:
    return [placed(c.submit(r, now_s)).worker_id for r in requests]
