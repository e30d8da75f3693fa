"""Sweeps (issue 20): one scenario on one endpoint (or the simulated cluster) along one load
axis, arms compared point by point. Each point is a normal Run (runs app); the sweep keeps the
validated sweep spec (runner.sweep.SweepSpec as JSON, its base the point runs' common spec)
and, per point, the run it made and the PointResult once that run ended. The order points run
in is the engine's pure Planner, rebuilt from the stored results (sweeps/services.py).

Status machine (services):
    queued ──first point's run made──▶ running ──planner done──▶ succeeded
    queued | running ──cancel──▶ cancelled;  a point's run that cannot be made ──▶ failed
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from aiperf_web.core import limits
from aiperf_web.core.models import PublicModel
from aiperf_web.endpoints.models import Endpoint
from aiperf_web.runs.models import Run, TargetKind
from aiperf_web.scenarios.models import Scenario
from aiperf_web.teams.models import Team


class SweepStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


SWEEP_ACTIVE = (SweepStatus.QUEUED, SweepStatus.RUNNING)


class SweepVerdict(models.TextChoices):
    # pass: every point ran and counts (valid); fail: some point is invalid (its reason in
    # the points) or the sweep failed; "" while it runs or when cancelled.
    PASS = "pass", "pass"
    FAIL = "fail", "fail"
    NONE = "", "none"


class Sweep(PublicModel):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="sweeps")
    # Sweeps outlive their scenario and endpoint: the names are kept beside the links.
    scenario = models.ForeignKey(
        Scenario, on_delete=models.SET_NULL, null=True, blank=True, related_name="sweeps"
    )
    scenario_name = models.CharField(max_length=limits.NAME_CHARS)
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.SET_NULL, null=True, blank=True, related_name="sweeps"
    )
    endpoint_name = models.CharField(max_length=limits.NAME_CHARS)
    target_kind = models.CharField(max_length=10, choices=TargetKind.choices)
    # The validated SweepSpec as JSON (runner.sweep.parse_sweep reads it back); its base is
    # the scenario's spec with the target and the launch's base overrides, never a key.
    spec = models.JSONField()
    # What the launch sent besides scenario and endpoint: the base overrides and the sweep's
    # own fields (axis, arms, repeats, mode, SLOs ...), so a re-run asks for the same.
    overrides = models.JSONField(default=dict, blank=True)
    request = models.JSONField(default=dict, blank=True)
    mode = models.CharField(max_length=10)  # list | auto | slo (spec.mode, for lists)
    axis = models.CharField(max_length=20)  # concurrency | rate_per_s
    status = models.CharField(
        max_length=10, choices=SweepStatus.choices, default=SweepStatus.QUEUED
    )
    # Why it failed or was cancelled, one line for a person.
    reason = models.TextField(blank=True, default="")
    verdict = models.CharField(max_length=10, choices=SweepVerdict.choices, blank=True, default="")
    # The verdict in a sentence, and the report's headline per arm pair (text) at the end.
    verdict_message = models.TextField(blank=True, default="")
    headlines = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    rerun_of = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="reruns"
    )

    class Meta:
        indexes = [models.Index(fields=["team", "-created_at"], name="sweep_team_created")]

    def __str__(self) -> str:
        return f"sweep of {self.scenario_name} on {self.endpoint_name} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in SWEEP_ACTIVE

    @property
    def name(self) -> str:
        return f"{self.scenario_name} on {self.endpoint_name}"


class SweepPoint(models.Model):
    """One point of a sweep: an arm at one load, one repeat; the run made for it, and what it
    measured (runner.sweep.PointResult as JSON) once that run ended."""

    sweep = models.ForeignKey(Sweep, on_delete=models.CASCADE, related_name="points")
    # Order of creation: arms interleave (A@1 B@1 A@2 ...), as the planner hands them out.
    seq = models.IntegerField()
    arm = models.CharField(max_length=40)
    load = models.FloatField()
    repeat = models.IntegerField(default=0)
    # list | synchronous | saturation | between | search (runner.sweep.Phase)
    phase = models.CharField(max_length=12, default="list")
    # The run it made (a normal run with its own page); its page links back to the sweep.
    run = models.OneToOneField(
        Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="sweep_point"
    )
    # Set once the run ended: whether the point counts, why not, and its PointResult.
    valid = models.BooleanField(null=True, blank=True)
    invalid_reason = models.TextField(blank=True, default="")
    result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["seq"]
        constraints = [
            models.UniqueConstraint(fields=["sweep", "seq"], name="sweep_point_seq"),
            models.UniqueConstraint(
                fields=["sweep", "arm", "load", "repeat", "phase"], name="sweep_point_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.arm} at {self.load:g} #{self.repeat} ({self.phase})"
