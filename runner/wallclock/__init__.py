"""Live replay: the replay engine on the wall clock, sending real requests over HTTP (the
wall-clock driver; `runner/sim/` is the virtual-time one). Named for its clock so that "live"
means one thing, the web service's live dashboard.

replay_live(traces, config, *, sink=None, stop=None) -> LiveResult    (a coroutine)
LiveConfig                                                           the run's knobs
"""

from runner.wallclock.replay import LiveConfig, LiveResult, replay_live

__all__ = ["LiveConfig", "LiveResult", "replay_live"]
