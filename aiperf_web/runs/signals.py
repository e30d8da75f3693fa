"""What the worker announces to the apps above `runs`, which it must not import."""

from __future__ import annotations

from django.dispatch import Signal

# Sent by the worker after a run's final save and its last log lines, with `run_obj` (the
# Run, its team and scenario loaded). Receivers must not raise for the run's sake: the
# worker logs what one raises and goes on (reports/webhooks.py sends the run-end webhooks).
run_ended = Signal()
