"""Operator memory (seed 002): the current notes, their superseded revisions, and the runtime switch."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from tess_site.accounts.models import Tenant


class OperatorMemory(models.Model):
    """The current revision of one operator note; unique per tenant, operator, category and slot.

    Recalled only for the operator who sent the turn, and only while active (not expired). ``memory_id``
    stays the same across corrections; ``predecessor_revision`` points at the revision in history that
    this one replaced. ``reauthorized_at`` is the latest confirmation or reauthorization: recency and expiry
    count from it. ``last_used_at`` moves only when prompt recall selects the row, never on inspection.

    Storage (migration 0003, PostgreSQL): recall rewrites ``last_used_at`` on every operator turn, so the
    table keeps free room on each page (fillfactor) and no index contains that column. The update then
    stays on the row's page as a HOT update and touches no index, and recall costs the same whatever the
    table's size. Recall finds an operator's rows through the unique constraints' ``(tenant, operator)``
    prefix and erasure through the ``operator`` index; a separate tenant index would only cost writes.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    operator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    category = models.CharField(max_length=32)
    slot = models.CharField(max_length=64)
    memory_id = models.UUIDField(default=uuid.uuid4, editable=False)
    revision = models.PositiveIntegerField(default=1)
    predecessor_revision = models.PositiveIntegerField(null=True, blank=True)
    value = models.CharField(max_length=280)
    canonical = models.CharField(max_length=280)
    ref = models.CharField(max_length=80, blank=True)
    source_ref = models.CharField(max_length=80)
    card_ref = models.CharField(max_length=64)
    confirmed_at = models.DateTimeField(default=timezone.now)
    reauthorized_ref = models.CharField(max_length=64)
    reauthorized_at = models.DateTimeField(default=timezone.now)
    salience = models.PositiveSmallIntegerField()
    expires_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "operator memory note"
        verbose_name_plural = "operator memory notes"
        constraints = [
            models.UniqueConstraint(fields=["tenant", "operator", "category", "slot"], name="memory_one_per_slot"),
            models.UniqueConstraint(
                fields=["tenant", "operator", "category", "canonical"], name="memory_content_once_per_category"
            ),
        ]

    def __str__(self) -> str:
        return f"memory {self.memory_id} r{self.revision} {self.category}/{self.slot}"


class OperatorMemoryHistory(models.Model):
    """A superseded revision, kept whole for correction lineage. Never a recall source."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    operator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    category = models.CharField(max_length=32)
    slot = models.CharField(max_length=64)
    memory_id = models.UUIDField()
    revision = models.PositiveIntegerField()
    predecessor_revision = models.PositiveIntegerField(null=True, blank=True)
    successor_revision = models.PositiveIntegerField()
    value = models.CharField(max_length=280)
    canonical = models.CharField(max_length=280)
    ref = models.CharField(max_length=80, blank=True)
    source_ref = models.CharField(max_length=80)
    card_ref = models.CharField(max_length=64)
    confirmed_at = models.DateTimeField()
    reauthorized_ref = models.CharField(max_length=64)
    reauthorized_at = models.DateTimeField()
    salience = models.PositiveSmallIntegerField()
    expires_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    superseded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "superseded operator memory note"
        verbose_name_plural = "superseded operator memory notes"
        constraints = [
            models.UniqueConstraint(fields=["memory_id", "revision"], name="memory_history_revision_once"),
        ]
        indexes = [
            models.Index(fields=["operator", "tenant", "category"], name="memory_history_owner"),
            models.Index(fields=["memory_id"], name="memory_history_lineage"),
        ]

    def __str__(self) -> str:
        return f"memory {self.memory_id} r{self.revision} → r{self.successor_revision}"


class MemorySwitch(models.Model):
    """The runtime kill switch: one row; ``enabled=False`` turns memory off for every operator at once.

    Read on every memory request, so flipping it (``tess_memory_switch off`` or the admin) needs no restart.
    No row means on.
    """

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    enabled = models.BooleanField(default=True)
    changed_at = models.DateTimeField(default=timezone.now)
    changed_by = models.CharField(max_length=150, blank=True)

    class Meta:
        verbose_name = "operator memory switch"
        verbose_name_plural = "operator memory switches"

    def __str__(self) -> str:
        return f"operator memory {'on' if self.enabled else 'off'}"


# The plugin's and reviewed coding memory's models live in their own packages; imported here so Django
# finds them as models of this app.
from .coding.models import CodingMemoryEntry, CodingMemoryExport, CodingMemoryReview  # noqa: E402
from .plugin.models import OperationalMemoryRecord  # noqa: E402

__all__ = [
    "CodingMemoryEntry",
    "CodingMemoryExport",
    "CodingMemoryReview",
    "MemorySwitch",
    "OperationalMemoryRecord",
    "OperatorMemory",
    "OperatorMemoryHistory",
]
