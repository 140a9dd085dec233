"""The audit feed: one append-only, hash-chained row per audited event, and each tenant's chain head.

The tables keep the names they were created with (``approvals_app_*``), so the append-only triggers of
``approvals_app/migrations/0002_audit_append_only.py`` and every raw query stay valid. The tenant is named
by its model label: the feed depends on nothing of ``tess_site.accounts``, which records into it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditChainHead(models.Model):
    """The latest sequence number and hash of one tenant's audit chain; locked by every writer.

    Keeping the head in its own row lets writers serialize per tenant (``SELECT … FOR UPDATE``) without
    locking the tenant row or scanning the feed.
    """

    tenant = models.OneToOneField(
        "accounts.Tenant", on_delete=models.PROTECT, primary_key=True, related_name="audit_head"
    )
    last_seq = models.BigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default="")

    class Meta:
        db_table = "approvals_app_auditchainhead"

    def __str__(self) -> str:
        return f"{self.tenant_id} at #{self.last_seq}"


class AuditEvent(models.Model):
    """One append-only audit record, hash-chained per tenant.

    On PostgreSQL, triggers reject UPDATE, DELETE and TRUNCATE on this table; ``tess_audit_verify``
    recomputes the chains. ``metadata`` holds identifiers and small values only, never free text from
    users (no message or memory text, no secrets): ``record_audit`` enforces it.
    """

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="audit_events")
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
        db_table = "approvals_app_auditevent"
        ordering = ["tenant_id", "seq"]
        constraints = [models.UniqueConstraint(fields=["tenant", "seq"], name="audit_seq_unique_per_tenant")]
        indexes = [
            models.Index(fields=["tenant", "-seq"], name="approvals_a_tenant__eba290_idx"),
            models.Index(fields=["correlation_id"], name="approvals_a_correla_04453e_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id}#{self.seq} {self.action} {self.target_type}:{self.target_id} {self.outcome}"
