"""How an object's team reads beside its name in a list of choices: "demo · team default",
and nothing at all when everything listed belongs to one team (a bare "(default)" after
every name read as a property of the object, not as the team it belongs to)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def team_suffix(team: Any, *, teams: set[Any]) -> str:
    """' · team NAME' when the choices span more than one team (`teams`: their ids), else ''."""
    return f" · team {team.name}" if len(teams) > 1 else ""


def team_ids(*groups: Iterable[Any]) -> set[Any]:
    """The teams the objects of the groups belong to (objects with a `team_id`)."""
    return {obj.team_id for group in groups for obj in group}
