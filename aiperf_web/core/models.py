"""What every stored object shares: a UUID public id (URLs, API, channel group names) beside
the integer key that stays internal."""

from __future__ import annotations

import uuid

from django.db import models


class PublicModel(models.Model):
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
