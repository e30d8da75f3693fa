"""Dynamo's wire names, shared by both sides: the affinity emitters that put them on requests
and the simulated cluster and mock server that read them. One spelling, one place."""

from __future__ import annotations

from typing import Final

__all__ = ["PARENT_SESSION_HEADER", "SESSION_FINAL_HEADER", "SESSION_HEADER"]

# Header affinity of released Dynamo (1.3 on; the frontend needs
# --router-session-affinity-ttl-secs): the key a request binds under, and since 1.6 the parent's
# id, which keys the request on a sibling group derived from the parent instead.
SESSION_HEADER: Final = "X-Dynamo-Session-ID"
PARENT_SESSION_HEADER: Final = "X-Dynamo-Parent-Session-ID"
# The request that would close the session (Dynamo 1.6 keeps the binding to its idle TTL).
SESSION_FINAL_HEADER: Final = "X-Dynamo-Session-Final"
