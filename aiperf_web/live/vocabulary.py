"""What the pages' scripts must agree with Python on, handed to them in one JSON object
(json_script "vocabulary" in base.html and the offline export; static/js/vocabulary.js reads
it): the live channel's message types and close codes (runs/messages.py), the run statuses
and which are final (runs/models.py), and each error category's colour (the categories are
the engine's, runner/errors.py). tests/web/test_live_messages.py holds the scripts to it: no
script writes a status list, a close code or a category colour of its own."""

from __future__ import annotations

from typing import Any

from aiperf_web.runs.messages import channel_vocabulary
from aiperf_web.runs.models import ACTIVE, FINAL, Status
from runner import ERROR_CATEGORIES, ErrorCategory

# One colour per category, each its own (a lost worker was drawn in connect's grey).
ERROR_COLOURS: dict[ErrorCategory, str] = {
    ErrorCategory.CONNECT: "#5f6368",
    ErrorCategory.TIMEOUT: "#f9ab00",
    ErrorCategory.HTTP_4XX: "#9334e6",
    ErrorCategory.HTTP_429: "#e8710a",
    ErrorCategory.HTTP_5XX: "#d93025",
    ErrorCategory.STREAM_BROKEN: "#12b5cb",
    ErrorCategory.BAD_PAYLOAD: "#795548",
    ErrorCategory.CANCELLED: "#9aa0a6",
    ErrorCategory.WORKER_LOST: "#e52592",
}


def page_vocabulary() -> dict[str, Any]:
    return {
        **channel_vocabulary(),
        "statuses": [s.value for s in Status],
        "active_statuses": [s.value for s in ACTIVE],
        "final_statuses": [s.value for s in FINAL],
        "error_categories": [c.value for c in ERROR_CATEGORIES],
        "error_colours": {c.value: ERROR_COLOURS[c] for c in ERROR_CATEGORIES},
    }
