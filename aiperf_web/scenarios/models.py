"""Traces (uploaded files, validated by the engine's loaders and stored with their statistics)
and scenarios (a workload plus a default run spec, a description and tags)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from aiperf_web.core import limits
from aiperf_web.core.models import PublicModel
from aiperf_web.teams.models import Team


class Trace(PublicModel):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="traces")
    name = models.CharField(max_length=limits.TRACE_NAME_CHARS)
    filename = models.CharField(max_length=255)
    format = models.CharField(max_length=20)
    size_bytes = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    # The file itself, gzip-compressed, in the database: every worker host reads it from
    # there, so no shared file system is needed.
    content_gz = models.BinaryField()
    # What `runner.inspect_trace` reported: trees, sessions, requests, children, depth, span,
    # token statistics.
    stats = models.JSONField(default=dict)
    # The built-in sample this was imported from ('' for uploads).
    sample = models.CharField(max_length=100, blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="trace_name_per_team")]

    def __str__(self) -> str:
        return self.name


class Scenario(PublicModel):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="scenarios")
    name = models.CharField(max_length=limits.NAME_CHARS)
    description = models.TextField(max_length=limits.DESCRIPTION_CHARS, blank=True, default="")
    # Normalised ",tag1,tag2," so that one `contains` query filters on SQLite and PostgreSQL.
    tags = models.CharField(max_length=limits.TAGS_STORED_CHARS, blank=True, default="")
    traces = models.ManyToManyField(Trace, related_name="scenarios", blank=True)
    # The default RunSpec as JSON (target and trace paths are filled at launch).
    spec = models.JSONField(default=dict)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    updated_at = models.DateTimeField(auto_now=True)
    # Run-end webhook of this scenario's runs, beside the team's (aiperf_web/reports/webhooks.py);
    # the secret is stored encrypted and signs the body (HMAC-SHA256).
    webhook_url = models.URLField(max_length=limits.WEBHOOK_URL_CHARS, blank=True, default="")
    webhook_secret = models.TextField(blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="scenario_name_per_team")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def tag_list(self) -> list[str]:
        return [t for t in self.tags.split(",") if t]
