"""JSON shapes every app's API shares: text a person sends, a reference to another object.
Each app's `api.py` holds its own router and the shapes only it answers with."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from ninja import Schema
from pydantic import AfterValidator

from aiperf_web.core.text import text_check

# Text a person sends: refused (422 naming the field) when it holds NUL or a lone surrogate.
Text = Annotated[str, AfterValidator(text_check)]


class Ref(Schema):
    id: UUID | None
    name: str


def ref(obj: Any, name: str) -> dict[str, Any]:
    """A Ref to `obj` (a PublicModel, or None once deleted) under the name kept for it."""
    return {"id": obj.uuid if obj is not None else None, "name": name}
