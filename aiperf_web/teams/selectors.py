"""Reads about teams. Every other app scopes its queries with `team_ids_for` and checks
actions with `require_role`."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from aiperf_web.core.errors import Forbidden, Invalid, NotFound
from aiperf_web.core.ids import parse_uuid
from aiperf_web.teams.models import ROLE_RANK, ApiToken, Membership, Role, Team

AnyUser = User | AnonymousUser


def user_or_none(user: AnyUser) -> User | None:
    """The user to record as an object's author (None for anonymous)."""
    return user if isinstance(user, User) else None


def team_list_for_user(*, user: AnyUser) -> QuerySet[Team]:
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user).order_by("name")


def team_ids_for(*, user: AnyUser) -> list[int]:
    return list(team_list_for_user(user=user).values_list("id", flat=True))


def role_in_team(*, user: AnyUser, team: Team) -> Role | None:
    if not user.is_authenticated:
        return None
    membership = Membership.objects.filter(user=user, team=team).only("role").first()
    return None if membership is None else Role(membership.role)


def require_role(*, user: AnyUser, team: Team, role: Role) -> Role:
    """The user's role in `team` when it is at least `role`. Outsiders get NotFound (the object
    does not exist for them); members below the role get Forbidden."""
    have = role_in_team(user=user, team=team)
    if have is None:
        raise NotFound()
    if ROLE_RANK[have] < ROLE_RANK[role]:
        needs = "the admin role" if role == Role.ADMIN else f"{role} or admin"
        raise Forbidden(f"your role in team {team.name} is {have}; this needs {needs}")
    return have


def teams_with_role(*, user: AnyUser, role: Role) -> list[Team]:
    """Teams where the user has at least `role` (the choices of a create form)."""
    if not user.is_authenticated:
        return []
    memberships = Membership.objects.filter(user=user).select_related("team")
    return sorted(
        (m.team for m in memberships if ROLE_RANK[Role(m.role)] >= ROLE_RANK[role]),
        key=lambda t: t.name,
    )


def team_for_create(*, user: AnyUser, team_id: object) -> Team:
    """The team a new object goes in: the named one, else the user's only team (as a member
    or admin). Forbidden in none; Invalid when several and none named."""
    if team_id:
        return team_get_for_user(user=user, team_id=str(team_id))
    teams = teams_with_role(user=user, role=Role.MEMBER)
    if len(teams) == 1:
        return teams[0]
    if not teams:
        raise Forbidden("you are not a member (or admin) of any team")
    raise Invalid.field("team", "you are in several teams: name one")


def team_get_for_user(*, user: AnyUser, team_id: str) -> Team:
    uid = parse_uuid(team_id)
    team = team_list_for_user(user=user).filter(uuid=uid).first() if uid else None
    if team is None:
        raise NotFound("team not found")
    return team


def membership_list(*, team: Team) -> QuerySet[Membership]:
    return Membership.objects.filter(team=team).select_related("user").order_by("user__username")


def api_token_list(*, user: AnyUser) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user_or_none(user), revoked_at__isnull=True).order_by(
        "-created_at"
    )
