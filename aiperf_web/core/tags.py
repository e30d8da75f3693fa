"""Tags are stored as ",a,b," so a single `contains` lookup filters by one tag portably."""

from __future__ import annotations

import re
from collections.abc import Iterable

from aiperf_web.core.errors import Invalid
from aiperf_web.core.limits import TAG_CHARS, TAGS_MAX

_TAG = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9_.:+-]{{0,{TAG_CHARS - 1}}}$")


def tags_normalize(raw: str | Iterable[str], *, field: str = "tags") -> str:
    items = raw.replace(" ", ",").split(",") if isinstance(raw, str) else list(raw)
    tags: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise Invalid.field(field, "tags are strings")
        item = item.strip()
        if not item:
            continue
        if not _TAG.match(item):
            raise Invalid.field(
                field,
                f"{item[:TAG_CHARS]!r}: a tag is 1-{TAG_CHARS} letters, digits or _ . : + -",
            )
        if item not in tags:
            tags.append(item)
    if len(tags) > TAGS_MAX:
        raise Invalid.field(field, f"at most {TAGS_MAX} tags")
    return "," + ",".join(tags) + "," if tags else ""


def tag_filter_value(tag: str) -> str:
    return "," + tag.strip() + ","
