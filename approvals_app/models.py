"""Confirm cards, approval requests and their execution, and Mos hand-offs."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from tess_site.accounts.models import Tenant
from tess_site.leases import LeasedWork


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


class ApprovalSettings(models.Model):
    """Tenant-level approval policy. A tenant without a row uses the defaults (no self-approval)."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, primary_key=True, related_name="approval_settings")
    allow_self_approval = models.BooleanField(
        default=False, help_text="Let a requester who is also an approver decide their own request."
    )

    class Meta:
        verbose_name_plural = "approval settings"

    def __str__(self) -> str:
        return f"approval settings of {self.tenant_id}"


class Approval(models.Model):
    """A request for a human decision on one exact action (DESIGN.md, authority model).

    ``action``, ``target_type``/``target_id`` and ``parameters`` are exactly what will be executed. The
    decision is a conditional UPDATE from ``pending`` (one decision however many clicks race); ``consumed_at``
    is set once, by the executor's claim, so an approval is used at most once.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"
        EXPIRED = "expired"

    class Execution(models.TextChoices):
        NONE = "none"  # not approved (yet)
        QUEUED = "queued"
        EXECUTED = "executed"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="approvals")
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="tess_approvals")
    action = models.CharField(max_length=64)
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64)
    parameters = models.JSONField(default=dict, blank=True)
    session_id = models.CharField(max_length=64, null=True, blank=True)
    reason = models.TextField(blank=True)
    channel = models.CharField(max_length=16)
    correlation_id = models.CharField(max_length=128)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    execution = models.CharField(max_length=16, choices=Execution.choices, default=Execution.NONE)
    consumed_at = models.DateTimeField(null=True, blank=True)
    executed_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["tenant", "requester", "-created_at"], name="approval_requester_recent"),
            models.Index(fields=["tenant", "status", "expires_at"], name="approval_status_expiry"),
            # The expiry sweep and the pending gauge read pending requests across tenants by expiry.
            models.Index(fields=["expires_at"], condition=Q(status="pending"), name="approval_pending_expiry"),
        ]

    def __str__(self) -> str:
        return f"approval {self.id} {self.action} {self.target_type}:{self.target_id} {self.status}"


class ApprovalLink(models.Model):
    """One approver's one-time link to one approval. Only the SHA-256 of the token is stored."""

    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="links")
    approver = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["approval", "approver"], name="approval_link_one_per_approver"),
        ]
        indexes = [models.Index(fields=["approver", "-created_at"], name="approval_link_approver")]

    def __str__(self) -> str:
        return f"link of {self.approver_id} to {self.approval_id}"


class ApprovalExecution(LeasedWork):
    """The durable work of executing one approved action, claimed with a lease; exactly one per approval."""

    approval = models.OneToOneField(Approval, on_delete=models.CASCADE, related_name="execution_item")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta(LeasedWork.Meta):
        indexes = [
            models.Index(fields=["state", "lease_expires_at"], name="approval_exec_state_lease"),
            models.Index(fields=["state", "available_at"], name="approval_exec_state_avail"),
        ]

    def __str__(self) -> str:
        return f"execution of {self.approval_id} ({self.state})"


class Handoff(LeasedWork):
    """Mos-owned work (coding, reviews, merges) Tess handed to Mos, correlated with the turn that asked.

    ``status`` is Mos's side of the lifecycle: queued → dispatched → acknowledged → completed or failed; it
    only moves forward. The inherited lease fields are the dispatch work (a task claims it, the sweeper
    re-queues it). ``summary`` and ``payload`` hold the operator's request for Mos; ``result`` what Mos sent back.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        DISPATCHED = "dispatched"
        ACKNOWLEDGED = "acknowledged"
        COMPLETED = "completed"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="handoffs")
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="tess_handoffs")
    session_id = models.CharField(max_length=64, null=True, blank=True)
    correlation_id = models.CharField(max_length=128)
    summary = models.CharField(max_length=200)
    payload = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    adapter = models.CharField(max_length=16, blank=True)
    result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta(LeasedWork.Meta):
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["state", "lease_expires_at"], name="handoff_state_lease"),
            models.Index(fields=["state", "available_at"], name="handoff_state_avail"),
            models.Index(fields=["tenant", "requester", "-created_at"], name="handoff_requester_recent"),
        ]

    def __str__(self) -> str:
        return f"hand-off {self.id} {self.status}"


class InboxPreferences(models.Model):
    """Which channels tell one person, in one tenant, that something entered their inbox.

    The drawer's live update is always on. A person without a row gets the defaults below.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    browser = models.BooleanField(default=True, help_text="A browser notification from an open drawer.")
    webpush = models.BooleanField(default=True, help_text="Web Push to the browsers this person subscribed.")
    email = models.BooleanField(default=False, help_text="An e-mail to the person's address.")
    discord = models.BooleanField(default=False, help_text="A Discord direct message to the linked account.")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "inbox preferences"
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="inbox_prefs_one_per_member")]

    def __str__(self) -> str:
        return f"inbox preferences of {self.user_id} in {self.tenant_id}"


class PushSubscription(models.Model):
    """One browser's Web Push subscription (RFC 8030 endpoint, RFC 8291 keys) for one person in one tenant."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    endpoint = models.URLField(max_length=1000)
    p256dh = models.CharField(max_length=128)
    auth = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "user", "endpoint"], name="push_subscription_unique"),
        ]

    def __str__(self) -> str:
        return f"push subscription {self.pk} of {self.user_id}"
