"""Storage of the ``orm`` operational-memory adapter."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from tess_site.accounts.models import Tenant


class OperationalMemoryRecord(models.Model):
    """One captured lifecycle record (already redacted), in the namespace (instance, tenant, owner, session).

    ``instance`` is the configured adapter instance's name: two instances of the ``orm`` kind share this
    table and never see each other's rows. On PostgreSQL a GIN index over the English ``tsvector`` of
    ``text`` serves ranked search (migration 0002 creates it only there).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    instance = models.CharField(max_length=64)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    session = models.CharField(max_length=64)
    source = models.CharField(max_length=64)
    channel = models.CharField(max_length=16)
    correlation_id = models.CharField(max_length=64, blank=True)
    text = models.TextField()
    captured_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["instance", "tenant", "owner", "-captured_at"], name="opmem_owner_recent"),
        ]

    def __str__(self) -> str:
        return f"operational memory {self.id} ({self.source})"
