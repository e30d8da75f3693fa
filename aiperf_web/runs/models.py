"""Runs and what they measured: the status machine, the stored spec, the summary, the live
snapshots as a time series (RunSample) and the per-request records (RunRecord).

Status machine (each arrow is one conditional UPDATE, see services):
    queued ──claim──▶ running ──▶ succeeded | failed | cancelled
    queued ──cancel─▶ cancelled
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from aiperf_web.core import limits
from aiperf_web.core.models import PublicModel
from aiperf_web.endpoints.models import Endpoint
from aiperf_web.scenarios.models import Scenario
from aiperf_web.teams.models import Team


class Status(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


ACTIVE = (Status.QUEUED, Status.RUNNING)
FINAL = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)


class TargetKind(models.TextChoices):
    ENDPOINT = "endpoint", "endpoint"
    SIMULATED = "simulated", "simulated cluster"


class Run(PublicModel):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="runs")
    # Runs outlive their scenario and endpoint: the names are kept beside the links.
    scenario = models.ForeignKey(
        Scenario, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    scenario_name = models.CharField(max_length=limits.NAME_CHARS)
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    endpoint_name = models.CharField(max_length=limits.NAME_CHARS)
    target_kind = models.CharField(max_length=10, choices=TargetKind.choices)
    # The full RunSpec as JSON, never with the endpoint's key (attached by the worker).
    spec = models.JSONField()
    overrides = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # Why it failed or stopped, one line for a person (never a traceback).
    reason = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # Written by the worker every few seconds while running; a stale one means a lost worker.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True, default="")
    summary = models.JSONField(null=True, blank=True)
    records_count = models.IntegerField(default=0)
    samples_count = models.IntegerField(default=0)
    tags = models.CharField(max_length=limits.TAGS_STORED_CHARS, blank=True, default="")
    notes = models.TextField(max_length=limits.NOTES_CHARS, blank=True, default="")
    is_baseline = models.BooleanField(default=False)
    rerun_of = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="reruns"
    )
    # A queued run that must wait for this one to end first (the second run of an A/B pair):
    # no worker claims it while `after` is queued or running.
    after = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The endpoint lease (runs.line): a run on an endpoint waits while another runs on it,
    # unless it sets allow_overlap. An overlap that happened is kept on both runs, as a list of
    # {"run": uuid, "name": "scenario on endpoint", "at": ISO time it began}.
    allow_overlap = models.BooleanField(default=False)
    overlaps = models.JSONField(default=list, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["team", "-created_at"], name="run_team_created"),
            models.Index(fields=["status"], name="run_status"),
        ]

    def __str__(self) -> str:
        return f"{self.scenario_name} on {self.endpoint_name} ({self.status})"

    @property
    def tag_list(self) -> list[str]:
        return [t for t in self.tags.split(",") if t]

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None:
            return None
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class RunSample(models.Model):
    """One live snapshot as the engine reported it (cumulative; `t_s` from run start)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="samples")
    seq = models.IntegerField()
    t_s = models.FloatField()
    data = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="sample_seq_per_run")]


class RunRecord(models.Model):
    """One request as the engine recorded it. The key is (run, seq): one index, which keeps
    bulk COPY fast and streams a run's records in order."""

    pk = models.CompositePrimaryKey("run_id", "seq")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="records")
    seq = models.IntegerField()
    # Requests of the warmup (or priming) phase are stored but not counted in the summary.
    warmup = models.BooleanField(default=False)
    data = models.JSONField()
    # The request's inter-chunk gaps, packed as runner.metrics.gaps does (little-endian uint32
    # microseconds, 4 bytes a gap); the record's `chunk_gaps_us` (base64) is kept here, not in
    # `data`, and put back on export. Null: no ITL, or a row stored before gaps were kept.
    chunk_gaps = models.BinaryField(null=True)


class RunLog(models.Model):
    """A line of the run's log tail: the engine's warnings and the service's own notes."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="log_lines")
    at = models.DateTimeField(auto_now_add=True)
    level = models.CharField(max_length=10)
    message = models.TextField()
