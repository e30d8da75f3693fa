"""Live replay: the replay engine on the wall clock, sending real requests over HTTP.

replay_live(traces, config, *, sink=None, stop=None) -> LiveResult    (a coroutine)
LiveConfig                                                           the run's knobs
"""

from runner.live.replay import LiveConfig, LiveResult, replay_live

__all__ = ["LiveConfig", "LiveResult", "replay_live"]
