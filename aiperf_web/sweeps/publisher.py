"""The producer side of a sweep's live page: a nudge to the sweep's group on the channel layer
whenever something a viewer sees has changed, stored first.

  sweep.changed {sweep_id}      a point was made or ended, the sweep changed status, verdict
                                or cancel request (declared in runs/messages.py)

Who calls it: the sweep's driver (sweeps/services.py), after it stores a point's result, makes
the next point's run, or writes the sweep's status. The consumer (sweeps/consumers.py) answers a
nudge by reading the sweep again (its report, curves and table: sweeps/page.py) and sending
the whole of it, so a lost nudge costs only freshness (the consumer also re-reads every
STATUS_RECHECK_S) and several nudges in a burst cost one read. Best effort: it never fails the
write that called it.
"""

from __future__ import annotations

import logging
from uuid import UUID

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from aiperf_web.runs.messages import sweep_changed_event, sweep_group

__all__ = ["on_sweep_changed", "publish_sweep_update"]

log = logging.getLogger(__name__)


def publish_sweep_update(sweep_id: str | UUID) -> None:
    """Tell the sweep's viewers (its page's sockets) to read it again. `sweep_id`: the sweep's
    uuid (Sweep.uuid, or its text)."""
    layer = get_channel_layer()
    if layer is None:
        return
    group = sweep_group(sweep_id)
    try:
        async_to_sync(layer.group_send)(group, sweep_changed_event(sweep_id=str(sweep_id)))
    except Exception:
        log.warning("%s: live publish failed", group, exc_info=True)


def on_sweep_changed(sender: object, *, sweep_uuid: str, **_: object) -> None:
    """The receiver of sweeps.signals.sweep_changed (connected in SweepsConfig.ready)."""
    publish_sweep_update(sweep_uuid)
