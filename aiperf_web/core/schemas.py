"""JSON shapes every app's API shares: text a person sends, a reference to another object.
Each app's `api.py` holds its own router and the shapes only it answers with."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from ninja import Schema
from pydantic import AfterValidator, Field, StringConstraints

from aiperf_web.core import limits
from aiperf_web.core.text import text_check

# Text a person sends: refused (422 naming the field) when it holds NUL or a lone surrogate.
# The schema states the NUL rule as a pattern (a lone surrogate cannot be sent as UTF-8 JSON).
_TEXT = AfterValidator(text_check)
_NO_NUL = Field(json_schema_extra={"pattern": r"^[^\u0000]*$"})
Text = Annotated[str, _TEXT, _NO_NUL]
# Text that must say something: refused when empty or only white space (the services strip it).
_FILLED = Field(json_schema_extra={"pattern": r"^[^\u0000]*[^\s\u0000][^\u0000]*$"})

# Text that is stored, each with its limit (core/limits.py), which the schema states as
# maxLength: longer is 422 naming the field and the limit. The bound is the string's own (so it
# is checked first, and its message speaks of characters).
Name = Annotated[str, StringConstraints(max_length=limits.NAME_CHARS), _TEXT, _FILLED]
TraceName = Annotated[str, StringConstraints(max_length=limits.TRACE_NAME_CHARS), _TEXT, _NO_NUL]
Description = Annotated[str, StringConstraints(max_length=limits.DESCRIPTION_CHARS), _TEXT, _NO_NUL]
Notes = Annotated[str, StringConstraints(max_length=limits.NOTES_CHARS), _TEXT, _NO_NUL]
# A tag (core/tags.py): white space around it is dropped, an empty one skipped.
_TAG_PATTERN = rf"^\s*([A-Za-z0-9][A-Za-z0-9_.:+-]{{0,{limits.TAG_CHARS - 1}}})?\s*$"
Tag = Annotated[
    str,
    StringConstraints(max_length=limits.TAG_CHARS),
    _TEXT,
    Field(json_schema_extra={"pattern": _TAG_PATTERN}),
]
Tags = Annotated[
    list[Tag],
    Field(
        max_length=limits.TAGS_MAX,
        description=f"at most {limits.TAGS_MAX} tags, each 1-{limits.TAG_CHARS} letters, "
        "digits or _ . : + -",
    ),
]
BaseUrl = Annotated[str, StringConstraints(max_length=limits.BASE_URL_CHARS), _TEXT, _FILLED]
ModelName = Annotated[str, StringConstraints(max_length=limits.MODEL_CHARS), _TEXT, _FILLED]
ApiKey = Annotated[str, StringConstraints(max_length=limits.API_KEY_CHARS), _TEXT, _NO_NUL]
# (A pattern on a key would make the schema's patternProperties: Headers states it instead.)
HeaderName = Annotated[str, StringConstraints(max_length=limits.HEADER_NAME_CHARS), _TEXT]
HeaderValue = Annotated[
    str, StringConstraints(max_length=limits.HEADER_VALUE_CHARS), _TEXT, _NO_NUL
]
Headers = Annotated[
    dict[HeaderName, HeaderValue],
    Field(
        max_length=limits.HEADERS_MAX,
        description=f"at most {limits.HEADERS_MAX} headers",
        json_schema_extra={
            "propertyNames": {"maxLength": limits.HEADER_NAME_CHARS, "pattern": r"^[^\u0000]*$"}
        },
    ),
]
# A search or filter word: not stored, bounded like the text it searches.
Search = Annotated[str, StringConstraints(max_length=limits.SEARCH_CHARS), _TEXT, _NO_NUL]


class Ref(Schema):
    id: UUID | None
    name: str


def ref(obj: Any, name: str) -> dict[str, Any]:
    """A Ref to `obj` (a PublicModel, or None once deleted) under the name kept for it."""
    return {"id": obj.uuid if obj is not None else None, "name": name}
