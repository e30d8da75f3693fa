"""What the reports app stores: paired A/B launches, and the sampled agent trees of a
finished run (built once from its records, then read from here)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from aiperf_web.core.models import PublicModel
from aiperf_web.runs.models import Run
from aiperf_web.scenarios.models import Scenario
from aiperf_web.teams.models import Team


class ABPair(PublicModel):
    """Two runs of one scenario, target and seed that differ in one knob (policy or scope),
    executed one after the other."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="ab_pairs")
    scenario = models.ForeignKey(Scenario, on_delete=models.SET_NULL, null=True, blank=True)
    knob = models.CharField(max_length=20)
    value_a = models.CharField(max_length=40)
    value_b = models.CharField(max_length=40)
    run_a = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    run_b = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )


class RunTrees(models.Model):
    """The agent-tree view of a finished run: a few sampled trees, laid out."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="trees")
    built_at = models.DateTimeField(auto_now=True)
    data = models.JSONField()
