"""Durable sessions and everything that hangs off them: bindings, the event stream, inbox/outbox,
idempotency records, runtime attachments and per-object grants.

PostgreSQL is canonical for all of it (seed 001, "Session and State Model"); the channel layer only
wakes consumers up.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from guardian.models import GroupObjectPermissionBase, UserObjectPermissionBase

from providers_app.contract import RuntimeRef
from tess_site.accounts.models import Tenant
from tess_site.leases import LeasedWork


class SessionStatus(models.TextChoices):
    RUNNING = "running", "running"
    EXITED = "exited", "exited"  # the runtime ended by itself
    TERMINATED = "terminated", "terminated"  # ended by an approved terminate


ACTIVE_STATUSES = (SessionStatus.RUNNING,)


class AgentState(models.TextChoices):
    """The agent's state as its runtime says (``providers_app.contract.AgentState``, same values)."""

    WORKING = "working", "working"
    WAITING_FOR_INPUT = "waiting_for_input", "waiting for input"
    IDLE = "idle", "idle"
    ERROR = "error", "error"
    ENDED = "ended", "ended"
    UNKNOWN = "unknown", "unknown"


class Session(models.Model):
    """A Tess session: one runtime session (provider instance + exact runtime id) bound to one owner.

    ``last_seq`` is the sequence number of the newest event; it only moves under the row lock taken by
    ``services.events_append``. ``cursor`` is the provider's stream cursor, advanced in the same
    transaction as the ``output`` events read up to it, so output is never written twice or skipped.

    ``agent_state``/``agent_state_since`` are what the pump last announced (with a ``status`` event in
    the same transaction); ``agent_state_seen``/``agent_state_seen_since`` are a newer state the runtime
    shows that has not yet held for the provider's debounce.

    ``conversation_version`` moves whenever the session's conversation changes other than by appending to it
    (a new summary, a redaction): processes that keep the conversation read so far
    (``conversation_cache``) read again from scratch when it moved.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="tess_sessions")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="tess_sessions")
    title = models.CharField(max_length=200)
    provider_instance = models.CharField(max_length=64)
    runtime_id = models.CharField(max_length=128)
    runtime_identity = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=SessionStatus.choices, default=SessionStatus.RUNNING)
    cursor = models.CharField(max_length=128, blank=True)
    checkpoint = models.JSONField(default=dict, blank=True)
    last_seq = models.PositiveBigIntegerField(default=0)
    conversation_version = models.PositiveIntegerField(default=0)
    agent_state = models.CharField(max_length=24, choices=AgentState.choices, default=AgentState.UNKNOWN)
    agent_state_since = models.DateTimeField(null=True, blank=True)
    agent_state_seen = models.CharField(max_length=24, choices=AgentState.choices, blank=True)
    agent_state_seen_since = models.DateTimeField(null=True, blank=True)
    # The repository or workspace the session works on (``acme/payments-api``); blank: none. A session with
    # one gets the workspace's reviewed project context from plast-mem in its answers (seed 003).
    workspace_key = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("operate_session", "Send raw input to the session's runtime")]
        constraints = [
            # One live Tess session per runtime session: adopting twice (or racing) fails at the database.
            models.UniqueConstraint(
                fields=["provider_instance", "runtime_id"],
                condition=Q(status="running"),
                name="session_one_live_binding_per_runtime",
            ),
        ]
        indexes = [models.Index(fields=["tenant", "owner", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.title} ({self.provider_instance}:{self.runtime_id})"

    @property
    def runtime_ref(self) -> RuntimeRef:
        identity = {str(k): str(v) for k, v in (self.runtime_identity or {}).items()}
        return RuntimeRef(instance=self.provider_instance, runtime_id=self.runtime_id, identity=identity)


class SessionUserObjectPermission(UserObjectPermissionBase):
    """guardian grant of a Session to a user (a direct foreign key: no generic-relation scans)."""

    content_object = models.ForeignKey(Session, on_delete=models.CASCADE)

    class Meta(UserObjectPermissionBase.Meta):
        abstract = False


class SessionGroupObjectPermission(GroupObjectPermissionBase):
    """guardian grant of a Session to a group."""

    content_object = models.ForeignKey(Session, on_delete=models.CASCADE)

    class Meta(GroupObjectPermissionBase.Meta):
        abstract = False


class IngressChannel(models.TextChoices):
    WEB = "web", "web"
    CLI = "cli", "cli"
    DISCORD = "discord", "discord"


class IngressBinding(models.Model):
    """A channel's external reference (a Discord channel id, a CLI profile, a browser tab) bound to a session.

    Several bindings may point at one session; one external reference binds at most one active session.
    A Discord channel's binding lasts until it is bound elsewhere; a browser session's or a CLI profile's
    (``bindings.py``) also lapses at ``expires_at``, renewed as it is used: a lapsed one moves nowhere.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="bindings")
    channel = models.CharField(max_length=16, choices=IngressChannel.choices)
    external_ref = models.CharField(max_length=128)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["channel", "external_ref"], condition=Q(active=True), name="ingress_one_active_session"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel}:{self.external_ref} → {self.session_id}"


class SessionEvent(models.Model):
    """One event of a session's stream. ``seq`` is per session, gap-free and strictly increasing.

    Bodies follow ``sessions_app.stream`` (one schema per kind); they carry ids, never memory text.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=16)
    ts = models.DateTimeField(default=timezone.now)
    body = models.JSONField(default=dict)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="session_event_unique_seq")]
        indexes = [
            # A session's conversation (selectors.conversation_events) is read without walking its runtime
            # output, which outnumbers it by far.
            models.Index(
                fields=["session", "-seq"],
                name="session_event_conversation",
                condition=Q(kind__in=["turn.in", "turn.out", "approval", "handoff", "status"]),
            )
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.kind}"


class InboxItem(LeasedWork):
    """Raw input from an operator to the runtime, delivered by a task holding a lease."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="inbox")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    channel = models.CharField(max_length=16)
    correlation_id = models.CharField(max_length=64, blank=True)
    text = models.TextField()
    # Keystrokes of a terminal, typed exactly as they are; otherwise a message, typed and then Enter.
    keys = models.BooleanField(default=False)
    # What the provider dedupes on, so a re-delivery after a lost lease is not a second send.
    provider_key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_seq = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta(LeasedWork.Meta):
        indexes = [
            models.Index(fields=["state", "lease_expires_at"], name="inbox_state_lease"),
            models.Index(fields=["state", "available_at"], name="inbox_state_available"),
        ]

    def __str__(self) -> str:
        return f"inbox {self.pk} → {self.session_id} ({self.state})"


class CaptureItem(LeasedWork):
    """One lifecycle capture for a person's operational memory (seed 000), written in the transaction of the
    lifecycle change it records and delivered by a task holding a lease (``lifecycle.capture_deliver``), so a
    process that dies after that commit loses nothing: the sweeper hands the item to another worker."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # The capture's namespace: a session's id, or ``approval:<id>`` for an approval executed outside any.
    session_key = models.CharField(max_length=80)
    source = models.CharField(max_length=64)
    text = models.TextField()
    correlation_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta(LeasedWork.Meta):
        indexes = [
            models.Index(fields=["state", "lease_expires_at"], name="capture_state_lease"),
            models.Index(fields=["state", "available_at"], name="capture_state_available"),
        ]

    def __str__(self) -> str:
        return f"capture {self.pk} {self.source} → {self.session_key} ({self.state})"


class OutboxItem(LeasedWork):
    """An event Tess pushes to a bound channel that cannot read the stream itself (e.g. Discord)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="outbox")
    channel = models.CharField(max_length=16, choices=IngressChannel.choices)
    external_ref = models.CharField(max_length=128)
    event_seq = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta(LeasedWork.Meta):
        indexes = [
            models.Index(fields=["state", "lease_expires_at"], name="outbox_state_lease"),
            models.Index(fields=["state", "available_at"], name="outbox_state_available"),
        ]

    def __str__(self) -> str:
        return f"outbox {self.pk} → {self.channel}:{self.external_ref} ({self.state})"


class IdempotencyState(models.TextChoices):
    IN_FLIGHT = "in_flight", "in flight"
    DONE = "done", "done"


class IdempotencyRecord(models.Model):
    """The outcome of one ``Idempotency-Key`` of one actor in one tenant, kept 24 hours."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=IdempotencyState.choices, default=IdempotencyState.IN_FLIGHT)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "actor", "key"], name="idempotency_unique_key"),
        ]
        indexes = [models.Index(fields=["created_at"])]

    def __str__(self) -> str:
        return f"{self.key} ({self.state})"


class AttachMode(models.TextChoices):
    READ_ONLY = "read_only", "read only"
    INTERACTIVE = "interactive", "interactive"


class RuntimeAttachment(models.Model):
    """A user's attachment to a session. Interactive ones allow raw input until detached or idle too long."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="attachments")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    mode = models.CharField(max_length=16, choices=AttachMode.choices, default=AttachMode.READ_ONLY)
    created_at = models.DateTimeField(default=timezone.now)
    last_activity_at = models.DateTimeField(default=timezone.now)
    detached_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["session", "user", "detached_at"])]

    def __str__(self) -> str:
        return f"{self.user_id} on {self.session_id} ({self.mode})"


class MigrationStatus(models.TextChoices):
    CUTOVER = "cutover", "cut over"
    ROLLED_BACK = "rolled_back", "rolled back"


class SessionMigration(models.Model):
    """One move of a session's ingress bindings to a session on another runtime provider instance.

    ``binding_ids`` are exactly the bindings the cutover moved; a rollback moves those (and only those)
    back to ``source``. Bindings move in place, so a Discord channel keeps its binding row and follows.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    source = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="migrations_out")
    target = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="migrations_in")
    binding_ids = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=MigrationStatus.choices, default=MigrationStatus.CUTOVER)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    rolled_back_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    rolled_back_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["source", "status"], name="migration_source_status"),
            models.Index(fields=["target"], name="migration_target"),
        ]

    def __str__(self) -> str:
        return f"migration {self.pk}: {self.source_id} → {self.target_id} ({self.status})"


class TurnRun(models.Model):
    """A copilot turn between its first step (accepted) and its last (written), outside any transaction.

    The row exists only while the turn thinks (recall, prompt, model, providers): the step that writes the
    reply deletes it in the same transaction, so a turn is either written whole or still here. A row older
    than ``gateway.turn_abandoned_after()`` belongs to a process that died or hung: ``turns_fail_abandoned``
    writes its ``turn.in`` and a failure into the stream and deletes it. A turn that finds its row gone when
    it comes to write writes nothing; a later Stop is the same move (it removes or marks this row).
    """

    turn_id = models.CharField(max_length=32, primary_key=True)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=16)
    text = models.TextField()
    started_at = models.DateTimeField(default=timezone.now)
    # Set by a Stop (``turn_stop``), on whichever node it arrives: the durable half of the stop, which the
    # turn's own process reads when it starts waiting on the model and when it writes the turn.
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    # What the turn may spend, held against the budgets it was admitted under until its usage is written
    # (``budgets.budget_admit``): zero when no budget applied.
    reserved_tokens = models.PositiveBigIntegerField(default=0)
    reserved_cost = models.DecimalField(max_digits=18, decimal_places=8, default=0)
    reserved_currency = models.CharField(max_length=3, blank=True)

    class Meta:
        indexes = [models.Index(fields=["started_at"])]

    def __str__(self) -> str:
        return f"turn {self.turn_id}"


class CostSource(models.TextChoices):
    REPORTED = "reported", "reported by the runtime or the model API"
    PRICED = "priced", "priced by Tess from its price table"
    UNPRICED = "unpriced", "tokens known, no price for the model"
    ESTIMATED = "estimated", "a stopped or broken call that reported nothing: tokens estimated, then priced"


class UsageRecord(models.Model):
    """One billable step of an agent or of Tess's own model: the usage ledger, append-only.

    ``source_ref`` is the step's id where it was recorded (``pi:<entry id>``, ``turn:<turn id>``): unique per
    session, so re-reading a file or replaying a result never counts a step twice. ``cost`` is null unless
    ``cost_source`` is ``reported`` or ``priced``; an unpriced step is never a zero.
    """

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="usage")
    operator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    provider_instance = models.CharField(max_length=64)
    model = models.CharField(max_length=128, blank=True)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    cache_write_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=18, decimal_places=8, null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    cost_source = models.CharField(max_length=16, choices=CostSource.choices)
    source_ref = models.CharField(max_length=128)
    recorded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "source_ref"], name="usage_one_row_per_source_step"),
            models.CheckConstraint(
                condition=Q(cost__isnull=True) | Q(cost_source__in=["reported", "priced", "estimated"]),
                name="usage_cost_only_when_known",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "operator", "recorded_at"]),
            models.Index(fields=["tenant", "recorded_at"]),
        ]

    def __str__(self) -> str:
        return f"usage {self.source_ref} ({self.session_id})"


class UsageDay(models.Model):
    """The ledger summed per session, day (UTC), model and currency, kept with every append: what the usage
    API groups, so its cost follows the days and sessions asked about, not the ledger's rows."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    operator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    provider_instance = models.CharField(max_length=64)
    model = models.CharField(max_length=128, blank=True)
    day = models.DateField()
    currency = models.CharField(max_length=3, blank=True)  # blank: the steps that had no cost
    steps = models.PositiveBigIntegerField(default=0)
    unpriced_steps = models.PositiveBigIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    cache_write_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=24, decimal_places=8, null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "day", "model", "currency", "operator", "provider_instance"],
                name="usage_day_one_row_per_key",
            )
        ]
        indexes = [models.Index(fields=["tenant", "day"]), models.Index(fields=["tenant", "operator", "day"])]

    def __str__(self) -> str:
        return f"usage of {self.session_id} on {self.day}"


class ConversationSummary(models.Model):
    """A summary of a session's earlier conversation (its ``turn.in`` / ``turn.out`` pairs and the system lines
    between them), written by the configured model when the conversation outgrew ``TESS_CONVERSATION_TOKENS``.

    It covers the conversation events with ``first_seq <= seq <= last_seq`` (and, folded into its text, the
    summary before it); later prompts carry the newest summary, then the turns after ``last_seq``. It is the
    session's own context: never operator memory, never read for another session. Distinct from the runtime
    checkpoint a provider keeps on ``Session.checkpoint``.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="conversation_summaries")
    first_seq = models.PositiveBigIntegerField()
    last_seq = models.PositiveBigIntegerField()
    text = models.TextField()
    adapter = models.CharField(max_length=32)
    model = models.CharField(max_length=128)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "conversation summaries"
        constraints = [
            models.UniqueConstraint(fields=["session", "last_seq"], name="conversation_summary_unique_last_seq")
        ]

    def __str__(self) -> str:
        return f"{self.session_id} summary of #{self.first_seq}-#{self.last_seq}"


class BudgetPeriod(models.TextChoices):
    DAY = "day", "day"
    WEEK = "week", "week (from Monday)"
    MONTH = "month", "month"


class BudgetMetric(models.TextChoices):
    COST = "cost", "cost"
    TOKENS = "tokens", "tokens"


class BudgetAction(models.TextChoices):
    NOTIFY = "notify", "notify only"
    REQUIRE_APPROVAL = "require_approval", "require an approval for further turns and input"


class Budget(models.Model):
    """A limit on the ledger over a period (a day, a week from Monday, a month, in the tenant's time zone): for
    the whole tenant, one operator (their sessions and their turns), or one session; in cost (one currency)
    or tokens (all four kinds). At 80 % the owner is told once per period; at 100 % ``action`` applies.
    Tenant admins set budgets in the admin; changes are audited."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    operator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    session = models.ForeignKey(Session, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    period = models.CharField(max_length=8, choices=BudgetPeriod.choices, default=BudgetPeriod.MONTH)
    metric = models.CharField(max_length=8, choices=BudgetMetric.choices, default=BudgetMetric.COST)
    currency = models.CharField(max_length=3, blank=True, help_text="For a cost budget: the currency counted.")
    limit = models.DecimalField(max_digits=18, decimal_places=4)
    action = models.CharField(max_length=16, choices=BudgetAction.choices, default=BudgetAction.NOTIFY)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(operator__isnull=True) | Q(session__isnull=True), name="budget_one_subject"
            ),
            models.CheckConstraint(condition=Q(limit__gt=0), name="budget_limit_positive"),
            models.CheckConstraint(
                condition=(Q(metric="cost") & ~Q(currency="")) | (Q(metric="tokens") & Q(currency="")),
                name="budget_currency_only_for_cost",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def subject(self) -> str:
        if self.session_id:
            return f"session {self.session_id}"
        if self.operator_id:
            return f"operator {self.operator}"
        return "tenant"


class BudgetNotice(models.Model):
    """A budget reached 80 % or 100 % in one period: written once (unique), it is the owner's inbox item for
    that period and the proof the notice was given."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="notices")
    period_start = models.DateTimeField()
    level = models.PositiveSmallIntegerField()  # 80 or 100
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["budget", "period_start", "level"], name="budget_notice_once_per_period")
        ]

    def __str__(self) -> str:
        return f"{self.budget} at {self.level}%"
