"""Approvals and the audit feed."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from tess_site.accounts.models import Tenant


class AuditChainHead(models.Model):
    """The latest sequence number and hash of one tenant's audit chain; locked by every writer.

    Keeping the head in its own row lets writers serialize per tenant (``SELECT … FOR UPDATE``) without
    locking the tenant row or scanning the feed.
    """

    tenant = models.OneToOneField(Tenant, on_delete=models.PROTECT, primary_key=True, related_name="audit_head")
    last_seq = models.BigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default="")

    def __str__(self) -> str:
        return f"{self.tenant_id} at #{self.last_seq}"


class AuditEvent(models.Model):
    """One append-only audit record, hash-chained per tenant.

    On PostgreSQL, triggers reject UPDATE, DELETE and TRUNCATE on this table; ``tess_audit_verify``
    recomputes the chains. ``metadata`` holds identifiers and small values only, never free text from
    users (no message or memory text, no secrets): ``record_audit`` enforces it.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="audit_events")
    seq = models.BigIntegerField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    actor_label = models.CharField(max_length=150)
    channel = models.CharField(max_length=16)
    action = models.CharField(max_length=64)
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64, blank=True)
    outcome = models.CharField(max_length=32)
    correlation_id = models.CharField(max_length=128)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["tenant_id", "seq"]
        constraints = [models.UniqueConstraint(fields=["tenant", "seq"], name="audit_seq_unique_per_tenant")]
        indexes = [
            models.Index(fields=["tenant", "-seq"]),
            models.Index(fields=["correlation_id"]),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id}#{self.seq} {self.action} {self.target_type}:{self.target_id} {self.outcome}"


class Card(models.Model):
    """A proposed operator-owned mutation that only its owner's confirmation applies (DESIGN.md, authority model).

    ``kind`` names the handler that applies it (``approvals_app.cards.register_card_handler``). Confirming is
    single-use: a conditional UPDATE from ``pending``. Once decided, ``payload`` keeps ids only (note text is
    scrubbed) and ``outcome`` holds the server's result without text.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        CONFIRMED = "confirmed"
        DISMISSED = "dismissed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="cards")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="cards")
    kind = models.CharField(max_length=32)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    payload = models.JSONField(default=dict, blank=True)
    outcome = models.JSONField(null=True, blank=True)
    session_id = models.CharField(max_length=64, null=True, blank=True)
    correlation_id = models.CharField(max_length=128)
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "owner", "-created_at"], name="card_owner_recent")]

    def __str__(self) -> str:
        return f"card {self.id} {self.kind} {self.status}"
