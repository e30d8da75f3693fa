"""An endpoint: an OpenAI-compatible server a team benchmarks. The API key and the headers
marked secret are stored only encrypted (Fernet) and are never rendered, logged or exported
again. A Dynamo endpoint also keeps what its last "Test connection" found about session
affinity (the engine's `check_affinity`): which generation it speaks and which affinity modes
will work there."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from aiperf_web.core import limits
from aiperf_web.core.models import PublicModel
from aiperf_web.teams.models import Team
from runner import NO_SESSION_CONTROL_LABEL, Generation, accepted_affinities


class ServerKind(models.TextChoices):
    OPENAI = "openai", "OpenAI-compatible"
    DYNAMO = "dynamo", "NVIDIA Dynamo"
    VLLM = "vllm", "vLLM"
    SGLANG = "sglang", "SGLang"


class Endpoint(PublicModel):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="endpoints")
    name = models.CharField(max_length=limits.NAME_CHARS)
    base_url = models.CharField(max_length=limits.BASE_URL_CHARS)
    model = models.CharField(max_length=limits.MODEL_CHARS)
    api_key_encrypted = models.TextField(blank=True, default="")
    extra_headers = models.JSONField(default=dict, blank=True)
    # Headers that are credentials (an Azure-style `api-key`, a gateway token): a Fernet token of
    # their JSON object, kept like the API key: never rendered, returned, logged or put in a
    # run's stored spec; the worker attaches them at run time. Their names are not secret.
    secret_headers_encrypted = models.TextField(blank=True, default="")
    secret_header_names = models.JSONField(default=list, blank=True)
    server_kind = models.CharField(
        max_length=10, choices=ServerKind.choices, default=ServerKind.OPENAI
    )
    # The built-in mock cluster: its URL follows the port `manage.py serve` started it on.
    is_builtin = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    updated_at = models.DateTimeField(auto_now=True)
    # What the last connection test found (Dynamo kind only); all null until one ran, cleared
    # when the base URL or the kind changes. `affinity_generation` is a runner.dynamo.Generation
    # value; null with a detection time means the server has no Dynamo session_control. The
    # modes that work follow from it and `header_affinity` (runner.accepted_affinities).
    affinity_generation = models.CharField(max_length=10, null=True, blank=True)
    header_affinity = models.BooleanField(null=True, blank=True)
    affinity_summary = models.TextField(null=True, blank=True)
    affinity_server_message = models.TextField(null=True, blank=True)
    affinity_detected_at = models.DateTimeField(null=True, blank=True)

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
    def affinity_detected(self) -> bool:
        return self.affinity_detected_at is not None

    @property
    def generation(self) -> Generation | None:
        """The Dynamo generation the last connection test found (None: none found, or none
        ran; a value no generation has any more reads as none)."""
        try:
            return Generation(self.affinity_generation) if self.affinity_generation else None
        except ValueError:
            return None

    @property
    def affinity_choices(self) -> tuple[str, ...]:
        """The affinity modes a run on this endpoint may use: the engine's answer for its kind
        and what the last connection test found (runner.accepted_affinities)."""
        return accepted_affinities(
            dynamo=self.server_kind == ServerKind.DYNAMO,
            detected=self.affinity_detected,
            generation=self.generation,
            header_affinity=self.header_affinity,
        )

    @property
    def kind_with_article(self) -> str:
        """ "an OpenAI-compatible", "an NVIDIA Dynamo", "a vLLM", "an SGLang": as said aloud."""
        label = str(self.get_server_kind_display())
        return f"{'an' if label[:1] in 'AEIOSN' else 'a'} {label}"

    @property
    def nvext_actions(self) -> str | None:
        """The affinity_actions dynamo-nvext must use here (AffinityDetection.nvext_actions)."""
        generation = self.generation
        return None if generation is None else generation.nvext_actions

    @property
    def generation_label(self) -> str:
        if not self.affinity_detected:
            return ""
        generation = self.generation
        return NO_SESSION_CONTROL_LABEL if generation is None else generation.label

    @property
    def header_affinity_only(self) -> bool:
        """The generation pins sessions by header alone (no session_control): its headline
        already says whether header affinity is on."""
        generation = self.generation
        return generation is not None and not generation.session_control

    @property
    def header_affinity_label(self) -> str:
        """Whether X-Dynamo-Session-ID pins sessions, in a few words."""
        generation = self.generation
        if generation is not None and not generation.header_affinity and not self.header_affinity:
            return f"off — {generation.label} has no header affinity"
        if self.header_affinity is True:
            return "on — X-Dynamo-Session-ID pins sessions"
        if self.header_affinity is False:
            return (
                "off — X-Dynamo-Session-ID changes nothing (the frontend needs "
                "--router-session-affinity-ttl-secs N)"
            )
        return "cannot be told here (no worker ids, or one worker served every probe)"

    @property
    def affinity_short(self) -> str:
        """A few words for a list cell (the headline says it whole)."""
        if not self.affinity_detected:
            return ""
        generation = self.generation
        if generation is None:
            return "no Dynamo session_control"
        if self.header_affinity_only:
            on = self.header_affinity
            state = "unknown" if on is None else "on" if on else "off"
            return f"{generation.short} {state}"
        return generation.short

    @property
    def affinity_headline(self) -> str:
        """One line for people: the generation and whether session affinity is on."""
        if not self.affinity_detected:
            return ""
        if self.header_affinity_only:
            return f"{self.generation_label}: {self.header_affinity_label}"
        if self.nvext_actions is not None:
            return (
                f"{self.generation_label}: on with dynamo-nvext "
                f"(affinity_actions {self.nvext_actions})"
            )
        return f"{self.generation_label}; header affinity {self.header_affinity_label}"
