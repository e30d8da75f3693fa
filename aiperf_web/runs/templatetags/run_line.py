"""`{% run_waiting run %}`: a queued run's place in line and what it waits for (runs.line), on
its page."""

from __future__ import annotations

from typing import Any

from django import template

from aiperf_web.runs.line import run_wait
from aiperf_web.runs.models import Run

register = template.Library()


@register.inclusion_tag("runs/_waiting.html")
def run_waiting(run_obj: Run) -> dict[str, Any]:
    wait = run_wait(run_obj)
    # Runs of its own team are linked; others' are only counted in the message.
    linked = [holder for holder in wait.waits_for if holder.id] if wait else []
    return {"wait": wait, "linked": linked}
