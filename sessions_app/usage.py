"""The usage ledger: each billable step recorded once, priced where its source gave tokens only, and read
back grouped through the same restriction as the sessions it belongs to.

A step's cost is what its source reported (``reported``), or its tokens priced from ``TESS_MODEL_PRICES``
(``priced``), or nothing: ``unpriced`` when the model has no price. A runtime that reports no usage (tmux,
Matrix) has no rows, and its sessions read "unknown", never zero. A missing figure is never written as 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.db import transaction
from django.db.models import F, QuerySet, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from tess_site.metrics import USAGE_COST, USAGE_TOKENS
from tess_site.scope import Scope

from .budgets import budgets_after_usage
from .models import CostSource, Session, UsageDay, UsageRecord
from .prices import PER, TOKEN_KINDS, Price, price_table
from .selectors import usage_days_restrict

__all__ = ["TOKEN_KINDS", "price_table", "usage_by_session", "usage_chart", "usage_grouped", "usage_record"]


def _cost(step: dict[str, Any], table: dict[str, Price]) -> tuple[Decimal | None, str, str]:
    """(cost, currency, cost_source) of one reported step."""
    if step.get("cost") is not None:
        return Decimal(str(step["cost"])), str(step.get("currency") or "USD"), CostSource.REPORTED
    price = table.get(str(step.get("model") or ""))
    if price is None:
        return None, "", CostSource.UNPRICED
    total = sum((Decimal(int(step.get(kind) or 0)) * price.per_million[kind] for kind in TOKEN_KINDS), Decimal(0))
    return total / PER, price.currency, CostSource.PRICED


def _when(at: Any) -> datetime:
    """When the step happened, as its source dated it (an ISO time or a datetime), else now."""
    if isinstance(at, str):
        at = parse_datetime(at)
    if isinstance(at, datetime) and at.tzinfo is not None:
        return at
    return timezone.now()


def usage_counted_on_commit(session: Session, rows: list[UsageRecord]) -> None:
    """Add new ledger rows to the Prometheus counters once they have committed."""
    if not rows:
        return
    tenant = session.tenant.slug
    tokens: dict[tuple[str, str, str], int] = {}
    costs: dict[tuple[str, str, str], Decimal] = {}
    for row in rows:
        for kind in TOKEN_KINDS:
            key = (row.provider_instance, row.model, kind)
            tokens[key] = tokens.get(key, 0) + getattr(row, f"{kind}_tokens")
        if row.cost is not None:
            key = (row.provider_instance, row.model, row.currency)
            costs[key] = costs.get(key, Decimal(0)) + row.cost

    def count() -> None:
        for (provider, model, kind), value in tokens.items():
            if value:
                USAGE_TOKENS.labels(tenant=tenant, provider=provider, model=model, kind=kind).inc(value)
        for (provider, model, currency), cost in costs.items():
            USAGE_COST.labels(tenant=tenant, provider=provider, model=model, currency=currency).inc(float(cost))

    transaction.on_commit(count)


def _day_key(row: UsageRecord) -> tuple[str, str, str, int, str]:
    day = row.recorded_at.astimezone(UTC).date().isoformat()
    return (day, row.model, row.currency, row.operator_id, row.provider_instance)


def usage_record(
    *, session: Session, steps: Iterable[dict[str, Any]], operator_id: int | None = None, provider: str = ""
) -> int:
    """Append the steps a runtime reported for ``session`` (``OutputChunk.usage``) and add them to the
    session's day rows; a step whose ``ref`` is already in the ledger is skipped. Call holding the session's
    row lock (the pump's transaction, which also advances its cursor): the lock keeps the check for known
    refs and the day sums exact. Returns how many steps were new.

    ``operator_id`` and ``provider`` default to the session's owner and provider instance (a runtime's steps);
    Tess's own model turns name the turn's actor and the model adapter. A ``source`` of ``estimated`` in a
    step (a stopped or broken model call that reported nothing) is kept as the row's cost source when priced."""
    table = price_table()
    rows: dict[str, UsageRecord] = {}
    for step in steps:
        cost, currency, source = _cost(step, table)
        if step.get("source") == CostSource.ESTIMATED and source != CostSource.UNPRICED:
            source = CostSource.ESTIMATED
        ref = str(step["ref"])[:128]
        rows[ref] = UsageRecord(
            tenant_id=session.tenant_id,
            session_id=session.pk,
            operator_id=operator_id or session.owner_id,
            provider_instance=provider or session.provider_instance,
            model=str(step.get("model") or "")[:128],
            input_tokens=int(step.get("input") or 0),
            output_tokens=int(step.get("output") or 0),
            cache_read_tokens=int(step.get("cache_read") or 0),
            cache_write_tokens=int(step.get("cache_write") or 0),
            cost=cost,
            currency=currency,
            cost_source=source,
            source_ref=ref,
            recorded_at=_when(step.get("at")),
        )
    if not rows:
        return 0
    known = UsageRecord.objects.filter(session_id=session.pk, source_ref__in=list(rows)).values_list(
        "source_ref", flat=True
    )
    for ref in known:
        del rows[ref]
    new = list(rows.values())
    UsageRecord.objects.bulk_create(new)
    days: dict[tuple[str, str, str, int, str], list[UsageRecord]] = {}
    for row in new:
        days.setdefault(_day_key(row), []).append(row)
    for (day, model, currency, operator, provider_instance), group in days.items():
        sums = {
            "steps": len(group),
            "unpriced_steps": sum(1 for row in group if row.cost_source == CostSource.UNPRICED),
            **{f"{kind}_tokens": sum(getattr(row, f"{kind}_tokens") for row in group) for kind in TOKEN_KINDS},
        }
        costs = [row.cost for row in group if row.cost is not None]
        cost = sum(costs, Decimal(0)) if costs else None
        updated = UsageDay.objects.filter(
            session_id=session.pk,
            day=day,
            model=model,
            currency=currency,
            operator_id=operator,
            provider_instance=provider_instance,
        ).update(
            **{name: F(name) + value for name, value in sums.items()},
            cost=Coalesce(F("cost"), Value(Decimal(0))) + cost if cost is not None else F("cost"),
        )
        if not updated:
            UsageDay.objects.create(
                tenant_id=session.tenant_id,
                session_id=session.pk,
                operator_id=operator,
                provider_instance=provider_instance,
                model=model,
                day=day,
                currency=currency,
                cost=cost,
                **sums,
            )
    usage_counted_on_commit(session, new)
    budgets_after_usage(session=session, rows=new)
    return len(new)


GROUPS = {
    "day": "day",
    "operator": "operator__username",
    "provider": "provider_instance",
    "model": "model",
    "session": "session_id",
}


SUMMED = ("steps", "unpriced_steps", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _days_between(scope: Scope, since: date | None, until: date | None) -> QuerySet[UsageDay]:
    days = usage_days_restrict(scope=scope)
    if since is not None:
        days = days.filter(day__gte=since)
    if until is not None:
        days = days.filter(day__lte=until)
    return days


def _summed(rows: QuerySet[UsageDay], *keys: str) -> QuerySet[Any]:
    """The day rows summed per ``keys`` and currency (``total_<field>`` and ``total_cost``)."""
    sums = {f"total_{name}": Sum(name) for name in SUMMED}
    return rows.values(*keys, "currency").annotate(**sums, total_cost=Sum("cost"))


def _figures(row: dict[str, Any]) -> dict[str, Any]:
    """A summed row as the API, the page and the CSV give it: the cost as a decimal string, or None."""
    cost = row["total_cost"]
    return {
        "currency": row["currency"] or None,
        **{name: row[f"total_{name}"] for name in SUMMED},
        "cost": None if cost is None else str(cost.normalize()),
    }


def usage_grouped(*, scope: Scope, group_by: str, since: date | None, until: date | None) -> list[dict[str, Any]]:
    """Sums per group and currency over the days ``since`` to ``until`` (inclusive, UTC): tokens, the cost
    where known, and how many steps had no price. Read from the day rows, never the whole ledger."""
    key = GROUPS[group_by]
    grouped = _summed(_days_between(scope, since, until), key).order_by(key, "currency")
    return [{"group": str(row[key]), **_figures(row)} for row in grouped]


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    colour: str
    label: str  # the tooltip: day, group and cost


PALETTE = ("#417690", "#e6a23c", "#5b9a68", "#b5534d", "#7b68b3", "#3aa6a6", "#c27ba0", "#8c8c3a")
CHART_WIDTH, CHART_HEIGHT, CHART_LEFT, CHART_BOTTOM = 720, 220, 56, 24


def usage_chart(*, scope: Scope, stack_by: str, since: date, until: date) -> dict[str, Any]:
    """Cost per day from ``since`` to ``until``, stacked by operator or provider, in the currency most of the
    cost is in, as bars ready to draw (server-rendered SVG: no script, no library)."""
    key = GROUPS[stack_by]
    rows = list(
        usage_days_restrict(scope=scope)
        .filter(day__gte=since, day__lte=until)
        .exclude(currency="")
        .values("day", key, "currency")
        .annotate(total=Sum("cost"))
        .order_by("day", key)
    )
    by_currency: dict[str, Decimal] = {}
    for row in rows:
        by_currency[row["currency"]] = by_currency.get(row["currency"], Decimal(0)) + (row["total"] or 0)
    currency = max(by_currency, key=lambda c: by_currency[c]) if by_currency else ""
    days = [since + timedelta(days=n) for n in range((until - since).days + 1)]
    groups = sorted({str(row[key]) for row in rows if row["currency"] == currency})
    colours = {group: PALETTE[n % len(PALETTE)] for n, group in enumerate(groups)}
    per_day: dict[date, list[tuple[str, Decimal]]] = {}
    for row in rows:
        if row["currency"] == currency and row["total"]:
            per_day.setdefault(row["day"], []).append((str(row[key]), row["total"]))
    top = max((sum(v for _, v in stack) for stack in per_day.values()), default=Decimal(0))
    plot_h = CHART_HEIGHT - CHART_BOTTOM - 8
    slot = (CHART_WIDTH - CHART_LEFT) / max(len(days), 1)
    bars: list[Bar] = []
    for n, day in enumerate(days):
        y = float(CHART_HEIGHT - CHART_BOTTOM)
        for group, value in per_day.get(day, []):
            height = float(value / top) * plot_h if top else 0.0
            y -= height
            label = f"{day.isoformat()} · {group}: {value.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP)} {currency}"
            bars.append(Bar(CHART_LEFT + n * slot + slot * 0.15, y, slot * 0.7, height, colours[group], label))
    ticks = [days[i] for i in range(0, len(days), max(1, len(days) // 6))]
    return {
        "currency": currency,
        "other_currencies": sorted(c for c in by_currency if c != currency),
        "bars": bars,
        "legend": [(group, colours[group]) for group in groups],
        "top": top.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP) if top else Decimal(0),
        "ticks": [(CHART_LEFT + days.index(d) * slot + slot / 2, d.strftime("%d %b")) for d in ticks],
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "left": CHART_LEFT,
        "baseline": CHART_HEIGHT - CHART_BOTTOM,
        "plot_top": 8,
    }


SESSION_SORTS = {
    "cost": F("total_cost").desc(nulls_last=True),  # a row with no cost is not the most expensive
    "steps": F("total_steps").desc(),
    "title": F("session__title").asc(),
    "operator": F("operator__username").asc(),
}


def usage_by_session(*, scope: Scope, since: date | None, until: date | None, sort: str) -> list[dict[str, Any]]:
    """One row per session and currency: the usage table of the usage page and its CSV export."""
    keys = ("session_id", "session__title", "operator__username", "provider_instance")
    rows = _summed(_days_between(scope, since, until), *keys).order_by(
        SESSION_SORTS.get(sort, SESSION_SORTS["cost"]), "session_id", "currency"
    )
    return [
        {
            "session_id": str(row["session_id"]),
            "title": row["session__title"],
            "operator": row["operator__username"],
            "provider": row["provider_instance"],
            **_figures(row),
        }
        for row in rows
    ]
