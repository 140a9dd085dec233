"""Budgets: limits on the usage ledger that hold through the authority model, never by dropping input.

A budget counts the ledger rows of its subject (the tenant, one operator, or one session) recorded in the
current period: the day, the week from Monday or the month, with its boundaries at midnight in the tenant's
time zone (``Tenant.time_zone``). Nothing is stored per period: a new period starts from nothing, and a
raised limit applies at once.

- At 80 % and at 100 % the budget's owner (the session's owner, the operator, or the tenant's admins for a
  tenant budget) gets an inbox item, once per period (``BudgetNotice``, unique), and the notice channels
  they chose.
- At 100 % with ``require_approval``, a turn that would ask the model and raw input to the runtime become a
  one-time-link approval request (``session.over_budget``) instead; the approved request runs that one turn
  or delivers that one input. Nothing reaches the model or the runtime before.

Concurrent turns: a turn is admitted under a lock on the budgets that apply (``budget_admit``, in the turn's
first transaction), only while the spend plus what the turns already running have reserved is under the limit,
and it reserves its own estimate (``TurnRun.reserved_*``) until its usage is written, in the same transaction
that removes the reservation. So however many turns arrive at once near the limit, the spend can pass it by
no more than what the admitted (already running) turns spend.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import DecimalField, F, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone

from approvals_app.inbox_items import item as inbox_item
from approvals_app.notifications import inbox_entered_on_commit
from tess_site.accounts.models import Membership
from tess_site.audit.services import record_audit
from tess_site.errors import Forbidden
from tess_site.scope import Role, Scope

from .models import (
    Budget,
    BudgetAction,
    BudgetMetric,
    BudgetNotice,
    BudgetPeriod,
    Session,
    TurnRun,
    UsageRecord,
)
from .prices import price_table

NOTICE_LEVELS = (80, 100)
TOKEN_SUM = F("input_tokens") + F("output_tokens") + F("cache_read_tokens") + F("cache_write_tokens")
TURN_REF_PREFIX = "turn:"
RECENT_TURNS = 20  # the recent turns whose largest usage a new turn reserves


# --- periods -------------------------------------------------------------------------------------------


def period_bounds(*, period: str, time_zone: str, now: datetime | None = None) -> tuple[datetime, datetime]:
    """The current period's start (inclusive) and end (exclusive), at local midnight in ``time_zone``."""
    zone = zoneinfo.ZoneInfo(time_zone)
    local = (now or timezone.now()).astimezone(zone)
    day = local.date()
    if period == BudgetPeriod.DAY:
        first, following = day, day + timedelta(days=1)
    elif period == BudgetPeriod.WEEK:
        first = day - timedelta(days=day.weekday())
        following = first + timedelta(days=7)
    else:
        first = day.replace(day=1)
        following = (first + timedelta(days=32)).replace(day=1)
    # Midnight of a date in the zone (a wall-clock time: DST changes move it in UTC, not locally).
    start = datetime(first.year, first.month, first.day, tzinfo=zone)
    end = datetime(following.year, following.month, following.day, tzinfo=zone)
    return start, end


def figure(value: Decimal) -> str:
    """A decimal as people write it: no exponent, no trailing zeros (``120``, ``12.5``)."""
    return f"{value.normalize():f}"


# --- what a budget has spent ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BudgetState:
    budget: Budget
    start: datetime
    end: datetime
    spent: Decimal
    reserved: Decimal

    @property
    def percent(self) -> int:
        return int(self.spent * 100 / self.budget.limit) if self.budget.limit else 0

    @property
    def reached(self) -> bool:
        return self.spent >= self.budget.limit

    def as_dict(self) -> dict[str, Any]:
        budget = self.budget
        return {
            "id": budget.pk,
            "name": budget.name,
            "subject": budget.subject,
            "period": budget.period,
            "metric": budget.metric,
            "currency": budget.currency or None,
            "limit": figure(budget.limit),
            "spent": figure(self.spent),
            "percent": self.percent,
            "action": budget.action,
            "period_start": self.start.isoformat(),
            "period_end": self.end.isoformat(),
            "blocking": self.reached and budget.action == BudgetAction.REQUIRE_APPROVAL,
        }


def _subject_rows(budget: Budget) -> Q:
    if budget.session_id:
        return Q(session_id=budget.session_id)
    if budget.operator_id:
        return Q(operator_id=budget.operator_id)
    return Q()


def _running_turns(budget: Budget) -> Q:
    if budget.session_id:
        return Q(session_id=budget.session_id)
    if budget.operator_id:
        return Q(actor_id=budget.operator_id)
    return Q()


def budget_state(budget: Budget, *, time_zone: str, now: datetime | None = None) -> BudgetState:
    """What ``budget`` has spent in its current period, and what the turns running under it have reserved."""
    start, end = period_bounds(period=budget.period, time_zone=time_zone, now=now)
    rows = UsageRecord.objects.filter(
        _subject_rows(budget), tenant_id=budget.tenant_id, recorded_at__gte=start, recorded_at__lt=end
    )
    running = TurnRun.objects.filter(_running_turns(budget), session__tenant_id=budget.tenant_id)
    zero = Value(Decimal(0), output_field=DecimalField(max_digits=24, decimal_places=8))
    if budget.metric == BudgetMetric.COST:
        spent = rows.filter(currency=budget.currency).aggregate(v=Coalesce(Sum("cost"), zero))["v"]
        reserved = running.filter(reserved_currency=budget.currency).aggregate(v=Coalesce(Sum("reserved_cost"), zero))[
            "v"
        ]
    else:
        spent = Decimal(rows.aggregate(v=Coalesce(Sum(TOKEN_SUM), 0))["v"])
        reserved = Decimal(running.aggregate(v=Coalesce(Sum("reserved_tokens"), 0))["v"])
    return BudgetState(budget=budget, start=start, end=end, spent=spent, reserved=reserved)


def budgets_applying(*, session: Session, operator_id: int) -> QuerySet[Budget]:
    """The budgets a step of ``operator_id`` in ``session`` counts against: the tenant's, the operator's and
    the session's."""
    return Budget.objects.filter(
        Q(operator__isnull=True, session__isnull=True) | Q(operator_id=operator_id) | Q(session_id=session.pk),
        tenant_id=session.tenant_id,
    )


def budgets_visible(*, scope: Scope) -> QuerySet[Budget]:
    """The budgets the scope may see: a tenant admin's or auditor's whole tenant; anyone else the tenant's
    own budget, their own and those of sessions they own."""
    budgets = Budget.objects.filter(tenant=scope.tenant).select_related("operator", "tenant")
    if scope.has_role(Role.ADMIN) or scope.has_role(Role.AUDITOR):
        return budgets
    if scope.actor is None:
        return budgets.none()
    return budgets.filter(
        Q(operator__isnull=True, session__isnull=True) | Q(operator=scope.actor) | Q(session__owner=scope.actor)
    )


def budget_states(*, scope: Scope) -> list[dict[str, Any]]:
    """The state of every budget the scope may see, for the usage page and the API."""
    zone = scope.tenant.time_zone
    return [budget_state(b, time_zone=zone).as_dict() for b in budgets_visible(scope=scope).order_by("name", "pk")]


# --- admitting a turn -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """What one turn is expected to spend: the largest of the tenant's recent turns with this model, or, before
    there are any, ``TESS_BUDGET_TURN_TOKENS`` priced at the model's dearest token price."""

    tokens: int
    cost: Decimal
    currency: str


def turn_estimate(*, tenant_id: int, model: str) -> Estimate:
    recent = list(
        UsageRecord.objects.filter(tenant_id=tenant_id, model=model, source_ref__startswith=TURN_REF_PREFIX)
        .order_by("-recorded_at")
        .values_list("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost", "currency")[
            :RECENT_TURNS
        ]
    )
    if recent:
        tokens = max(sum(row[:4]) for row in recent)
        costs = [(row[4], row[5]) for row in recent if row[4] is not None]
        cost, currency = max(costs) if costs else (Decimal(0), "")
        return Estimate(tokens=tokens, cost=cost, currency=currency)
    tokens = int(settings.TESS_BUDGET_TURN_TOKENS)
    price = price_table().get(model)
    if price is None:
        return Estimate(tokens=tokens, cost=Decimal(0), currency="")
    dearest = max(price.per_million.values())
    return Estimate(tokens=tokens, cost=dearest * tokens / Decimal(1_000_000), currency=price.currency)


@dataclass(frozen=True)
class Admission:
    blocked_by: Budget | None = None
    tokens: int = 0
    cost: Decimal = Decimal(0)
    currency: str = ""


def budget_admit(*, session: Session, operator_id: int, model: str | None) -> Admission:
    """Admit a model turn of ``operator_id`` in ``session`` with ``model``, or name the ``require_approval``
    budget that stops it. ``model`` ``None``: an adapter that reports no usage, which reserves nothing.

    Call inside the transaction that records the turn as running (``TurnRun``) with the returned reservation:
    the budgets stay locked until it commits, so admissions are taken one at a time and each sees the turns
    admitted before it."""
    budgets = list(budgets_applying(session=session, operator_id=operator_id).select_for_update().order_by("pk"))
    if not budgets:
        return Admission()
    zone = session.tenant.time_zone
    for budget in budgets:
        if budget.action != BudgetAction.REQUIRE_APPROVAL:
            continue
        state = budget_state(budget, time_zone=zone)
        if state.spent + state.reserved >= budget.limit:
            return Admission(blocked_by=budget)
    if model is None:
        return Admission()
    estimate = turn_estimate(tenant_id=session.tenant_id, model=model)
    return Admission(tokens=estimate.tokens, cost=estimate.cost, currency=estimate.currency)


def budget_blocking(*, session: Session, operator_id: int) -> Budget | None:
    """The ``require_approval`` budget that stops raw input to ``session`` now, if any (its spend, with the
    reservations of running turns, has reached the limit)."""
    zone = session.tenant.time_zone
    for budget in budgets_applying(session=session, operator_id=operator_id).filter(
        action=BudgetAction.REQUIRE_APPROVAL
    ):
        state = budget_state(budget, time_zone=zone)
        if state.spent + state.reserved >= budget.limit:
            return budget
    return None


# --- notices --------------------------------------------------------------------------------------------


def _recipients(budget: Budget) -> list[int]:
    if budget.session_id:
        return [Session.objects.values_list("owner_id", flat=True).get(pk=budget.session_id)]
    if budget.operator_id:
        return [budget.operator_id]
    admins = Membership.objects.filter(tenant_id=budget.tenant_id, role=Role.ADMIN.value)
    return list(admins.values_list("user_id", flat=True).order_by("user_id"))


def budget_item(budget: Budget, state: BudgetState, level: int, since: datetime) -> dict[str, Any]:
    """A budget notice as an inbox item: what reached what, and what happens now."""
    unit = budget.currency if budget.metric == BudgetMetric.COST else "tokens"
    then = (
        "further turns and input need an approval"
        if level >= 100 and budget.action == BudgetAction.REQUIRE_APPROVAL
        else "nothing is stopped"
    )
    return inbox_item(
        kind="budget",
        key=f"budget:{budget.pk}:{level}",
        object_id=str(budget.pk),
        title=(
            f"Budget {budget.name} ({budget.subject}) is at {state.percent}% of "
            f"{figure(budget.limit)} {unit} this {budget.period}: {then}"
        ),
        since=since,
        level=level,
        usage_url=reverse("usage:page"),
        session_id=str(budget.session_id) if budget.session_id else None,
    )


def budgets_after_usage(*, session: Session, rows: list[UsageRecord]) -> None:
    """After new ledger rows (in their transaction): give each budget that reached 80 % or 100 % of its period
    its notice, once per period and level."""
    for operator_id in sorted({row.operator_id for row in rows}):
        for budget in budgets_applying(session=session, operator_id=operator_id):
            state = budget_state(budget, time_zone=session.tenant.time_zone)
            for level in NOTICE_LEVELS:
                if state.spent * 100 >= budget.limit * level:
                    _notice_once(budget, state, level)


def _notice_once(budget: Budget, state: BudgetState, level: int) -> None:
    if BudgetNotice.objects.filter(budget=budget, period_start=state.start, level=level).exists():
        return
    try:
        with transaction.atomic():  # a concurrent writer of the same notice wins; this one gives none
            notice = BudgetNotice.objects.create(budget=budget, period_start=state.start, level=level)
    except IntegrityError:
        return
    for user_id in _recipients(budget):
        inbox_entered_on_commit(
            tenant_id=budget.tenant_id, user_id=user_id, item=budget_item(budget, state, level, notice.created_at)
        )


def budgets_waiting(scope: Scope) -> list[dict[str, Any]]:
    """The inbox source: the scope actor's budgets at 80 % or more this period (the highest notice each), while
    they still are (a raised limit takes the item away)."""
    if scope.actor is None:
        return []
    admin = scope.has_role(Role.ADMIN)
    mine = Q(operator=scope.actor) | Q(session__owner=scope.actor)
    if admin:
        mine |= Q(operator__isnull=True, session__isnull=True)
    items = []
    for budget in Budget.objects.filter(mine, tenant=scope.tenant).select_related("operator"):
        state = budget_state(budget, time_zone=scope.tenant.time_zone)
        notice = BudgetNotice.objects.filter(budget=budget, period_start=state.start).order_by("-level").first()
        if notice is not None and state.spent * 100 >= budget.limit * notice.level:
            items.append(budget_item(budget, state, notice.level, notice.created_at))
    return items


# --- changing budgets (tenant admins, in the admin) -------------------------------------------------------

BUDGET_FIELDS = ("operator_id", "session_id", "period", "metric", "currency", "limit", "action")


def budget_check(*, budget: Budget) -> None:
    """A budget names a member of its tenant or a session of its tenant (not both), a currency exactly when
    it counts cost, and a positive limit."""
    errors: dict[str, str] = {}
    if budget.operator_id and budget.session_id:
        errors["session"] = "A budget is for one operator or one session, not both."
    if (
        budget.operator_id
        and not Membership.objects.filter(tenant_id=budget.tenant_id, user_id=budget.operator_id).exists()
    ):
        errors["operator"] = "That person is not a member of this tenant."
    if budget.session_id and not Session.objects.filter(pk=budget.session_id, tenant_id=budget.tenant_id).exists():
        errors["session"] = "That session is not in this tenant."
    if budget.metric == BudgetMetric.COST:
        budget.currency = (budget.currency or "").upper()
        if not (len(budget.currency) == 3 and budget.currency.isalpha()):
            errors["currency"] = "A cost budget names its currency, such as USD."
    elif budget.currency:
        errors["currency"] = "A token budget has no currency."
    if budget.limit is None or budget.limit <= 0:
        errors["limit"] = "The limit is more than 0."
    if errors:
        raise ValidationError(errors)


def budget_save(*, scope: Scope, budget: Budget, created: bool) -> Budget:
    """Create or change a budget (a tenant admin of its tenant only), audited with what it now says."""
    if not scope.has_role(Role.ADMIN) or budget.tenant_id != scope.tenant.pk:
        raise Forbidden("Only the tenant's admins set its budgets.")
    budget_check(budget=budget)
    with transaction.atomic():
        budget.updated_at = timezone.now()
        budget.save()
        record_audit(
            scope,
            action="budget.created" if created else "budget.changed",
            target_type="budget",
            target_id=str(budget.pk),
            outcome="ok",
            metadata={name: _plain(getattr(budget, name)) for name in BUDGET_FIELDS},
        )
    return budget


def budget_delete(*, scope: Scope, budget: Budget) -> None:
    if not scope.has_role(Role.ADMIN) or budget.tenant_id != scope.tenant.pk:
        raise Forbidden("Only the tenant's admins set its budgets.")
    with transaction.atomic():
        record_audit(
            scope,
            action="budget.deleted",
            target_type="budget",
            target_id=str(budget.pk),
            outcome="ok",
            metadata={"budget_id": budget.pk},
        )
        budget.delete()


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return figure(value)
    return None if value is None else value if isinstance(value, int) else str(value)
