"""Teams own everything; a membership gives a user a role in one team; personal API tokens
are stored as SHA-256 digests (they are long random strings, so an unsalted digest is enough
and lets a lookup be one indexed query)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from aiperf_web.core import limits
from aiperf_web.core.models import PublicModel


class Role(models.TextChoices):
    ADMIN = "admin", "admin"
    MEMBER = "member", "member"
    VIEWER = "viewer", "viewer"


# What each role may do, in increasing order: viewers read, members launch and edit, admins
# also manage members.
ROLE_RANK = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2}


class Team(PublicModel):
    name = models.CharField(max_length=limits.NAME_CHARS, unique=True)
    # Run-end webhooks (aiperf_web/reports/webhooks.py): every run of the team that ends POSTs
    # here; the secret, encrypted like endpoint keys, signs the body (HMAC-SHA256).
    webhook_url = models.URLField(max_length=limits.WEBHOOK_URL_CHARS, blank=True, default="")
    webhook_secret = models.TextField(blank=True, default="")

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="one_membership_per_team")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class ApiToken(PublicModel):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=limits.NAME_CHARS)
    # The first characters, shown in lists so a person can tell their tokens apart.
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"
