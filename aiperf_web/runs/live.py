"""The producer side of the live channel: each stored snapshot goes to the run's group on the
channel layer as `{"type": "run.snapshot", "run_id", "seq", "t_s", "data"}` (docs/product.md §5).
The live dashboard's consumers subscribe to `run_group(run_id)`; a late joiner reads the
stored samples first (same seq numbers), so a lost message costs only freshness."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

log = logging.getLogger(__name__)


def run_group(run_uuid: str) -> str:
    return f"run-{run_uuid}"


def publish_snapshot(*, run_uuid: str, seq: int, t_s: float, data: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "run.snapshot", "run_id": run_uuid, "seq": seq, "t_s": t_s, "data": data}
    try:
        async_to_sync(layer.group_send)(run_group(run_uuid), message)
    except Exception:
        # Publishing is best effort: the samples are stored, a viewer catches up from them.
        log.warning("run %s: live publish failed", run_uuid, exc_info=True)
