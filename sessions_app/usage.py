"""The usage ledger: each billable step recorded once, priced where its source gave tokens only, and read
back grouped through the same restriction as the sessions it belongs to.

A step's cost is what its source reported (``reported``), or its tokens priced from ``TESS_MODEL_PRICES``
(``priced``), or nothing: ``unpriced`` when the model has no price. A runtime that reports no usage (tmux,
Matrix) has no rows, and its sessions read "unknown", never zero. A missing figure is never written as 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncDay

from tess_site.scope import Scope

from .models import CostSource, Session, UsageRecord
from .selectors import usage_restrict

TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")
PER = Decimal(1_000_000)


@dataclass(frozen=True)
class Price:
    per_million: dict[str, Decimal]
    currency: str


def price_table() -> dict[str, Price]:
    """``TESS_MODEL_PRICES`` checked: every price a non-negative decimal, a three-letter currency."""
    table: dict[str, Price] = {}
    raw = settings.TESS_MODEL_PRICES
    if not isinstance(raw, dict):
        raise ImproperlyConfigured("TESS_MODEL_PRICES must be an object of models.")
    for model, entry in raw.items():
        if not isinstance(entry, dict):
            raise ImproperlyConfigured(f"TESS_MODEL_PRICES[{model!r}] must be an object.")
        currency = entry.get("currency", "USD")
        if not (isinstance(currency, str) and len(currency) == 3 and currency.isalpha()):
            raise ImproperlyConfigured(f"TESS_MODEL_PRICES[{model!r}]['currency'] must be a code such as USD.")
        prices: dict[str, Decimal] = {}
        for kind in TOKEN_KINDS:
            try:
                prices[kind] = Decimal(str(entry.get(kind, "0")))
            except InvalidOperation:
                prices[kind] = Decimal(-1)
            if not prices[kind].is_finite() or prices[kind] < 0:
                raise ImproperlyConfigured(f"TESS_MODEL_PRICES[{model!r}][{kind!r}] must be a price of 0 or more.")
        table[str(model)] = Price(prices, currency.upper())
    return table


def _cost(step: dict[str, Any], table: dict[str, Price]) -> tuple[Decimal | None, str, str]:
    """(cost, currency, cost_source) of one reported step."""
    if step.get("cost") is not None:
        return Decimal(str(step["cost"])), str(step.get("currency") or "USD"), CostSource.REPORTED
    price = table.get(str(step.get("model") or ""))
    if price is None:
        return None, "", CostSource.UNPRICED
    total = sum((Decimal(int(step.get(kind) or 0)) * price.per_million[kind] for kind in TOKEN_KINDS), Decimal(0))
    return total / PER, price.currency, CostSource.PRICED


def usage_record(*, session: Session, steps: Iterable[dict[str, Any]]) -> int:
    """Append the steps a runtime reported for ``session`` (``OutputChunk.usage``); a step whose ``ref`` is
    already in the ledger is skipped. Call inside the transaction that advances the session's cursor.
    Returns how many rows were new."""
    table = price_table()
    rows = []
    for step in steps:
        cost, currency, source = _cost(step, table)
        rows.append(
            UsageRecord(
                tenant_id=session.tenant_id,
                session_id=session.pk,
                operator_id=session.owner_id,
                provider_instance=session.provider_instance,
                model=str(step.get("model") or "")[:128],
                input_tokens=int(step.get("input") or 0),
                output_tokens=int(step.get("output") or 0),
                cache_read_tokens=int(step.get("cache_read") or 0),
                cache_write_tokens=int(step.get("cache_write") or 0),
                cost=cost,
                currency=currency,
                cost_source=source,
                source_ref=str(step["ref"])[:128],
            )
        )
    if not rows:
        return 0
    before = UsageRecord.objects.filter(session_id=session.pk).count()
    UsageRecord.objects.bulk_create(rows, ignore_conflicts=True)
    return UsageRecord.objects.filter(session_id=session.pk).count() - before


GROUPS = {
    "day": "day",
    "operator": "operator__username",
    "provider": "provider_instance",
    "model": "model",
    "session": "session_id",
}


def usage_grouped(
    *, scope: Scope, group_by: str, since: datetime | None, until: datetime | None
) -> list[dict[str, Any]]:
    """Sums per group and currency: tokens, cost where known, and how many steps had no cost."""
    rows = usage_restrict(scope=scope)
    if since is not None:
        rows = rows.filter(recorded_at__gte=since)
    if until is not None:
        rows = rows.filter(recorded_at__lt=until)
    key = GROUPS[group_by]
    if group_by == "day":
        rows = rows.annotate(day=TruncDay("recorded_at"))
    grouped = (
        rows.values(key, "currency")
        .annotate(
            steps=Count("id"),
            input_tokens=Sum("input_tokens"),
            output_tokens=Sum("output_tokens"),
            cache_read_tokens=Sum("cache_read_tokens"),
            cache_write_tokens=Sum("cache_write_tokens"),
            cost=Sum("cost"),
            unpriced=Count("id", filter=Q(cost_source=CostSource.UNPRICED)),
        )
        .order_by(key, "currency")
    )
    return [
        {
            "group": str(row[key].date() if group_by == "day" else row[key]),
            "currency": row["currency"] or None,
            "steps": row["steps"],
            "input_tokens": row["input_tokens"] or 0,
            "output_tokens": row["output_tokens"] or 0,
            "cache_read_tokens": row["cache_read_tokens"] or 0,
            "cache_write_tokens": row["cache_write_tokens"] or 0,
            "cost": None if row["cost"] is None else str(row["cost"].normalize()),
            "unpriced_steps": row["unpriced"],
        }
        for row in grouped
    ]
