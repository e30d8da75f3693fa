"""The periodic pickup of stuck sweeps: every `interval_s`, each worker moves on the active
sweeps nothing else would move on (sweeps/services.py: sweeps_stuck), by the driver
`sweep_advance`.

The driver runs at launch and at every point run's end (the runs worker's `run_ended`
signal). A point run that ends without that signal (cancelled while queued from its own page,
failed by the stale-run reaper), or a driver call that failed midway (a database blip at the
launch's commit, a worker killed between a point's end and the next point's run), would leave
the sweep waiting for another run to end, which on a quiet service may be never. The pickup
does not wait for one. It is a thread of every Celery worker (started at `worker_ready`,
sweeps/apps.py), beside the runs' stale-run reaper; the driver serializes on the sweep's row
and is idempotent, so several workers' pickups and the signal agree.
"""

from __future__ import annotations

import logging
import threading

from django.db import DatabaseError, connection

from aiperf_web.sweeps.services import sweep_advance, sweeps_stuck

log = logging.getLogger(__name__)

__all__ = ["SweepPickup", "start_sweep_pickup", "sweeps_pick_up"]

# As often as the stale-run reaper looks (runs: StaleRunReaper), so a point run the reaper
# failed moves its sweep on within about one more interval.
PICKUP_EVERY_S = 10.0


def sweeps_pick_up() -> int:
    """Move on every stuck sweep once; returns how many were. One sweep's failure is logged
    and does not keep the others waiting."""
    moved = 0
    for sweep_pk in sweeps_stuck():
        try:
            sweep_advance(sweep_pk)
        except DatabaseError:
            raise  # the database is away: the next round tries them all again
        except Exception:
            log.exception("sweep pickup: moving sweep %s on failed", sweep_pk)
        else:
            moved += 1
    return moved


class SweepPickup(threading.Thread):
    """Every `interval_s`, `sweeps_pick_up()`; a daemon thread, stopped by `done.set()`."""

    def __init__(self, *, interval_s: float = PICKUP_EVERY_S) -> None:
        super().__init__(name="sweep-pickup", daemon=True)
        self.interval_s = interval_s
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.interval_s):
            try:
                moved = sweeps_pick_up()
                if moved:
                    log.warning("moved on %d sweep(s) no run's end had moved on", moved)
            except DatabaseError:
                log.warning("sweep pickup: the database is away", exc_info=True)
            except Exception:
                log.exception("sweep pickup failed")
            finally:
                connection.close()


def start_sweep_pickup(**_: object) -> None:
    """The receiver of Celery's `worker_ready`: every worker picks up stuck sweeps."""
    SweepPickup().start()
