"""An endpoint's detected Dynamo generation moves to the engine's one vocabulary
(runner.dynamo.Generation, as a spec's dynamo_version says it): the probe's old names "open"
(1.2.x) and "headers" (releases 1.3 to 1.6.x) become "1.2" and "1.6"; "bind" stays. The stored
list of usable modes goes: it follows from the generation and header affinity
(runner.accepted_affinities).

Backward, the old names come back and the usable list is recomputed with the rule of the time
(the names are written out here on purpose: a migration is history and must not follow the
engine's later vocabulary)."""

from __future__ import annotations

from typing import Any

from django.db import migrations

# old probe name -> generation value, as of this migration
_FORWARD = {"open": "1.2", "headers": "1.6", "bind": "bind"}
_BACKWARD = {new: old for old, new in _FORWARD.items()}


def forward(apps: Any, schema_editor: Any) -> None:
    Endpoint = apps.get_model("endpoints", "Endpoint")
    for old, new in _FORWARD.items():
        if old != new:
            Endpoint.objects.filter(affinity_generation=old).update(affinity_generation=new)


def backward(apps: Any, schema_editor: Any) -> None:
    Endpoint = apps.get_model("endpoints", "Endpoint")
    for endpoint in Endpoint.objects.exclude(affinity_detected_at=None):
        old = _BACKWARD.get(endpoint.affinity_generation or "")
        usable = ["none", "header"]  # the probe's rule before 0004
        if old is not None and old != "headers":
            usable.append("dynamo-nvext")
        if endpoint.header_affinity is not False:
            usable.append("dynamo-headers")
        endpoint.affinity_generation = old
        endpoint.affinity_usable = usable
        endpoint.save(update_fields=["affinity_generation", "affinity_usable"])


class Migration(migrations.Migration):
    dependencies = [
        ("endpoints", "0003_secret_headers"),
    ]

    operations = [
        migrations.RunPython(forward, backward),
        migrations.RemoveField(model_name="endpoint", name="affinity_usable"),
    ]
