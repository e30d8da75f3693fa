"""Public ids are UUIDs; anything else given as an id simply matches nothing (404, not 500)."""

from __future__ import annotations

import uuid


def parse_uuid(value: object) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (ValueError, AttributeError, TypeError):
        return None
