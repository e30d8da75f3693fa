"""Dynamo's wire names, shared by both sides: the affinity emitters that put them on requests
and the simulated cluster and mock server that read them. One spelling, one place."""

from __future__ import annotations

from typing import Final

__all__ = ["PARENT_SESSION_HEADER", "SESSION_HEADER"]

# Header affinity (Dynamo frontend --router-session-affinity-ttl-secs): the session's own id,
# and since v1.6 its parent's, so subagents group under the parent's key.
SESSION_HEADER: Final = "X-Dynamo-Session-ID"
PARENT_SESSION_HEADER: Final = "X-Dynamo-Parent-Session-ID"
