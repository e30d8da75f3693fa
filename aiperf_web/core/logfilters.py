"""Logging filters named in settings.LOGGING."""

from __future__ import annotations

import logging


class OneLineClientErrors(logging.Filter):
    """A refused request (403 and the other 4xx Django logs with the exception) is one line:
    the path and the exception's message, not its traceback. Tracebacks say where code broke;
    a refusal is the code working, and 35 lines per viewer's click drowned the run logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if record.exc_info and isinstance(status, int) and 400 <= status < 500:
            exc = record.exc_info[1]
            message = record.getMessage()
            if exc is not None and str(exc):
                message = f"{message} ({exc})"
            record.msg, record.args = message, ()
            record.exc_info, record.exc_text = None, None
        return True
