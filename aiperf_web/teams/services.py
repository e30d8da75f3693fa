"""Writes about teams, memberships and API tokens."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from aiperf_web.core.errors import Conflict, Invalid, NotFound
from aiperf_web.core.ids import parse_uuid
from aiperf_web.core.limits import NAME_CHARS, text_within
from aiperf_web.core.webhooks import webhook_set
from aiperf_web.teams.models import ApiToken, Membership, Role, Team
from aiperf_web.teams.selectors import AnyUser, require_role, user_or_none

TOKEN_PREFIX = "aip_"
# last_used_at is written at most this often per token: one API call must not cost a write.
_LAST_USED_RESOLUTION = timedelta(seconds=60)


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def team_create(*, name: str, owner: User) -> Team:
    name = text_within(name.strip(), field="name", limit=NAME_CHARS)
    if not name:
        raise Invalid.field("name", "a team needs a name")
    if Team.objects.filter(name=name).exists():
        raise Conflict.field("name", f"a team named {name!r} exists")
    with transaction.atomic():
        team = Team.objects.create(name=name)
        Membership.objects.create(team=team, user=owner, role=Role.ADMIN)
    return team


def team_webhook_set(
    *, actor: AnyUser, team: Team, url: str, secret: str = "", clear_secret: bool = False
) -> Team:
    """The team's run-end webhook (admins): every run of the team that ends is announced."""
    require_role(user=actor, team=team, role=Role.ADMIN)
    webhook_set(team, url=url, secret=secret, clear_secret=clear_secret)
    return team


def membership_set(*, actor: AnyUser, team: Team, username: str, role: str) -> Membership:
    """Add a user to the team, or change their role (admins only)."""
    require_role(user=actor, team=team, role=Role.ADMIN)
    if role not in Role.values:
        raise Invalid.field("role", f"{role!r} is not one of {', '.join(Role.values)}")
    user = get_user_model().objects.filter(username=username.strip()).first()
    if user is None:
        raise Invalid.field("username", f"no user named {username.strip()!r}")
    with transaction.atomic():
        membership, created = Membership.objects.select_for_update().get_or_create(
            team=team, user=user, defaults={"role": role}
        )
        if not created and membership.role != role:
            _keep_an_admin(team=team, leaving=membership)
            membership.role = role
            membership.save(update_fields=["role"])
    return membership


def membership_remove(*, actor: AnyUser, team: Team, username: str) -> None:
    require_role(user=actor, team=team, role=Role.ADMIN)
    with transaction.atomic():
        membership = (
            Membership.objects.select_for_update()
            .filter(team=team, user__username=username)
            .first()
        )
        if membership is None:
            raise NotFound("membership not found")
        _keep_an_admin(team=team, leaving=membership)
        membership.delete()


def _keep_an_admin(*, team: Team, leaving: Membership) -> None:
    if leaving.role != Role.ADMIN:
        return
    others = Membership.objects.filter(team=team, role=Role.ADMIN).exclude(pk=leaving.pk)
    if not others.exists():
        raise Invalid.field("role", "a team keeps at least one admin")


def api_token_create(*, user: User, name: str = "") -> tuple[ApiToken, str]:
    """A new token and its raw value, which is shown once and never stored."""
    name = text_within(name.strip(), field="name", limit=NAME_CHARS)
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name or "token",
        prefix=raw[:10],
        digest=_digest(raw),
    )
    return token, raw


def api_token_revoke(*, user: AnyUser, token_id: str) -> None:
    uid = parse_uuid(token_id)
    updated = (
        ApiToken.objects.filter(uuid=uid, user=user_or_none(user), revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if uid
        else 0
    )
    if updated != 1:
        raise NotFound("token not found")


def api_token_authenticate(*, raw: str) -> User | None:
    """The active user owning the raw token, or None. Records the last use (coarsely)."""
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    token = (
        ApiToken.objects.filter(digest=_digest(raw), revoked_at__isnull=True)
        .select_related("user")
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > _LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user
