"""Reviewed coding memory (seed 003): entries per workspace, their review records, and every export."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from tess_site.accounts.models import Tenant


class CodingMemoryEntry(models.Model):
    """One piece of coding knowledge about a workspace (``workspace_key``, e.g. ``acme/payments-api``).

    Candidates come from completed hand-off results (``origin="handoff"``) or are written by an operator.
    Only a human approver or admin moves an entry to ``active``, which also sets ``human_verified`` and the
    review fields; only active, human-verified entries with those fields are exported.
    """

    class Kind(models.TextChoices):
        CONSTRAINT = "constraint"
        FACT = "fact"
        PITFALL = "pitfall"
        COMMAND = "command"
        FILE_NOTE = "file_note"

    class Confidence(models.TextChoices):
        LOW = "low"
        MEDIUM = "medium"
        HIGH = "high"

    class Status(models.TextChoices):
        CANDIDATE = "candidate"
        ACTIVE = "active"
        REJECTED = "rejected"
        RETIRED = "retired"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    workspace_key = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    statement = models.TextField()
    evidence = models.TextField()
    confidence = models.CharField(max_length=8, choices=Confidence.choices)
    tags = models.JSONField(default=list)
    related_files = models.JSONField(default=list)
    source_run_id = models.CharField(max_length=100, blank=True)
    origin = models.CharField(max_length=16)  # "handoff" or "operator"
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.CANDIDATE)
    human_verified = models.BooleanField(default=False)
    reviewer = models.CharField(max_length=150, blank=True)
    review_rationale = models.TextField(blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_request = models.ForeignKey(
        "CodingMemoryReview", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "coding memory entry"
        verbose_name_plural = "coding memory entries"
        indexes = [models.Index(fields=["tenant", "workspace_key", "status"], name="codingmem_workspace")]

    def __str__(self) -> str:
        return f"{self.workspace_key} {self.kind} ({self.status})"


class CodingMemoryReview(models.Model):
    """A review request, apply or reject record of one entry: who, why, when. Never edited."""

    class Action(models.TextChoices):
        REQUEST = "request"
        APPLY = "apply"
        REJECT = "reject"
        RETIRE = "retire"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    entry = models.ForeignKey(CodingMemoryEntry, on_delete=models.CASCADE, related_name="reviews")
    action = models.CharField(max_length=8, choices=Action.choices)
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    rationale = models.TextField(blank=True)
    at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.action} of {self.entry_id}"


class CodingMemoryExport(models.Model):
    """One export: what (the records exactly as exported), when, by whom, and how ingestion into plast-mem went."""

    class Ingestion(models.TextChoices):
        NOT_CONFIGURED = "not_configured"
        PENDING = "pending"
        RETRYING = "retrying"
        INGESTED = "ingested"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    workspace_key = models.CharField(max_length=200)
    exported_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    exported_at = models.DateTimeField()
    via = models.CharField(max_length=16)  # "api" or "command"
    records = models.JSONField(default=list)
    record_count = models.PositiveIntegerField(default=0)
    ingestion = models.CharField(max_length=16, choices=Ingestion.choices, default=Ingestion.NOT_CONFIGURED)
    ingestion_attempts = models.PositiveSmallIntegerField(default=0)
    ingestion_error = models.CharField(max_length=300, blank=True)
    ingested_at = models.DateTimeField(null=True, blank=True)
    # When the sweep may (re)send it: after the backoff of a failed attempt, after an attempt in flight could
    # have finished, or after the first wake-up should have run (it may have been lost). None once settled.
    ingestion_next_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"export of {self.workspace_key} at {self.exported_at:%Y-%m-%d %H:%M}"
