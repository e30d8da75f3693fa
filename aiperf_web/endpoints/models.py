"""An endpoint: an OpenAI-compatible server a team benchmarks. The API key is stored only
encrypted (Fernet) and is never rendered, logged or exported again."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from aiperf_web.core.models import PublicModel
from aiperf_web.teams.models import Team


class ServerKind(models.TextChoices):
    OPENAI = "openai", "OpenAI-compatible"
    DYNAMO = "dynamo", "NVIDIA Dynamo"
    VLLM = "vllm", "vLLM"
    SGLANG = "sglang", "SGLang"


# Which affinity emitters make sense per server kind (PRODUCT.md §4.5): only Dynamo reads
# nvext.session_control and the X-Dynamo-* headers; every server can key on a plain header
# (vLLM production-stack session key, SGLang X-SMG-Routing-Key, X-Session-ID).
AFFINITY_BY_KIND: dict[str, tuple[str, ...]] = {
    ServerKind.OPENAI: ("none", "header"),
    ServerKind.DYNAMO: ("none", "dynamo-nvext", "dynamo-headers", "header"),
    ServerKind.VLLM: ("none", "header"),
    ServerKind.SGLANG: ("none", "header"),
}


class Endpoint(PublicModel):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="endpoints")
    name = models.CharField(max_length=100)
    base_url = models.CharField(max_length=500)
    model = models.CharField(max_length=200)
    api_key_encrypted = models.TextField(blank=True, default="")
    extra_headers = models.JSONField(default=dict, blank=True)
    server_kind = models.CharField(
        max_length=10, choices=ServerKind.choices, default=ServerKind.OPENAI
    )
    # The built-in mock cluster: its URL follows the port `manage.py serve` started it on.
    is_builtin = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="endpoint_name_per_team")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)

    @property
    def affinity_choices(self) -> tuple[str, ...]:
        return AFFINITY_BY_KIND[self.server_kind]
