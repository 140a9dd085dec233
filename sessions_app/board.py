"""Reads of the fleet board: every session the actor may see, one page at a time, with what waits on each.

One page is a fixed number of queries whatever the fleet's size: the count of matching sessions, then the
page's rows with their owners joined and their pending cards, approvals and hand-offs counted by correlated
subqueries (each through approvals_app's own permission rule, so a count never tells of rows the viewer may
not read). ``tests/sessions_app/test_board.py`` asserts it at 10 and at 1,000 sessions.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import (
    CharField,
    Count,
    DecimalField,
    F,
    IntegerField,
    Max,
    Min,
    OuterRef,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.functions import Cast, Coalesce

from approvals_app.approval_selectors import approvals_restrict
from approvals_app.card_selectors import cards_restrict
from approvals_app.handoff_selectors import handoffs_restrict
from providers_app.contract import ProviderError
from providers_app.registry import get_provider
from tess_site.scope import Scope

from .models import AgentState, Session, SessionStatus, UsageDay
from .selectors import sessions_visible

PAGE_SIZE = 50
PENDING_HANDOFFS = ("queued", "dispatched", "acknowledged")
AGENT_STATES = [value for value, _ in AgentState.choices]


@dataclass(frozen=True)
class BoardFilters:
    """What the board (or ``GET /api/v1/sessions/``) narrows to; empty strings mean "any"."""

    agent_state: str = ""
    provider: str = ""
    owner: str = ""  # a username
    q: str = ""  # part of the title, any case
    ended: bool = True  # False: running sessions only


def sessions_filtered(rows: QuerySet[Session], filters: BoardFilters) -> QuerySet[Session]:
    if filters.agent_state:
        rows = rows.filter(agent_state=filters.agent_state)
    if filters.provider:
        rows = rows.filter(provider_instance=filters.provider)
    if filters.owner:
        rows = rows.filter(owner__username=filters.owner)
    if filters.q:
        rows = rows.filter(title__icontains=filters.q)
    if not filters.ended:
        rows = rows.filter(status=SessionStatus.RUNNING)
    return rows


def _pending(rows: QuerySet[Any]) -> Coalesce:
    """How many of ``rows`` name the outer session (``session_id`` is text: the session's id as a string)."""
    per_session = (
        rows.filter(session_id=Cast(OuterRef("pk"), output_field=CharField()))
        .order_by()
        .values("session_id")
        .annotate(n=Count("pk"))
        .values("n")[:1]
    )
    return Coalesce(Subquery(per_session, output_field=IntegerField()), 0)


def _usage(aggregate: Any, output: Any, *, costed: bool = False) -> Subquery:
    """One sum over the session's usage day rows (``costed``: only the rows with a cost)."""
    # The agent's own steps: Tess's model turns in the session are the drawer's, not the runtime's.
    rows = UsageDay.objects.filter(session=OuterRef("pk"), provider_instance=OuterRef("provider_instance"))
    if costed:
        rows = rows.exclude(currency="")
    return Subquery(rows.order_by().values("session").annotate(v=aggregate).values("v")[:1], output_field=output)


def board_sessions(*, scope: Scope, filters: BoardFilters | None = None) -> QuerySet[Session]:
    """The visible sessions matching ``filters``, most recently active first, with owners and pending counts."""
    rows = sessions_filtered(sessions_visible(scope=scope), filters or BoardFilters(ended=False))
    return (
        rows.select_related("owner")
        .annotate(
            pending_cards=_pending(cards_restrict(scope).filter(status="pending")),
            pending_approvals=_pending(approvals_restrict(scope).filter(status="pending")),
            pending_handoffs=_pending(handoffs_restrict(scope).filter(status__in=PENDING_HANDOFFS)),
            usage_steps=_usage(Sum("steps"), IntegerField()),
            usage_unpriced=_usage(Sum("unpriced_steps"), IntegerField()),
            usage_cost=_usage(Sum("cost"), DecimalField(max_digits=24, decimal_places=8), costed=True),
            usage_currency=_usage(Max("currency"), CharField(), costed=True),
            usage_currency_first=_usage(Min("currency"), CharField(), costed=True),
        )
        .order_by("-updated_at", "-pk")
    )


def board_page(*, scope: Scope, filters: BoardFilters, number: int) -> Page[Session]:
    """One page of the board (two queries: the count and the rows); a number past the end is the last page."""
    return Paginator(board_sessions(scope=scope, filters=filters), PAGE_SIZE).get_page(number)


def board_row_of(*, scope: Scope, session_id: uuid.UUID | str) -> dict[str, Any] | None:
    """One session's row as the board shows it, or ``None`` when the actor may not see it (or it is gone)."""
    session = board_sessions(scope=scope, filters=BoardFilters()).filter(pk=session_id).first()
    return board_row(session) if session is not None else None


def board_providers(*, scope: Scope) -> list[str]:
    """The provider instances of the actor's visible sessions, for the filter."""
    names = sessions_visible(scope=scope).order_by().values_list("provider_instance", flat=True).distinct()
    return sorted(names)


def board_owners(*, scope: Scope) -> list[str]:
    """The owners of the actor's visible sessions, for the filter."""
    names = sessions_visible(scope=scope).order_by().values_list("owner__username", flat=True).distinct()
    return sorted(names)


def _counted(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _reports_usage(instance: str) -> bool:
    try:
        return get_provider(instance).reports_usage
    except ProviderError:
        return False


def usage_text(session: Session) -> str:
    """What the session's agent has cost so far, as the board shows it: a figure in its currency, with the
    steps no price was known for; "unknown" for a runtime that reports no usage (never 0)."""
    return usage_words(
        reports_usage=_reports_usage(session.provider_instance),
        steps=getattr(session, "usage_steps", None) or 0,
        unpriced=getattr(session, "usage_unpriced", None) or 0,
        cost=getattr(session, "usage_cost", None),
        currency=getattr(session, "usage_currency", None),
        first=getattr(session, "usage_currency_first", None),
    )


def usage_words(
    *, reports_usage: bool, steps: int, unpriced: int, cost: Decimal | None, currency: str | None, first: str | None
) -> str:
    if not steps:
        return "—" if reports_usage else "unknown"
    if currency and currency != first:
        text = "several currencies"
    elif currency and cost is not None:
        cents = cost.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        text = f"< 0.01 {currency}" if 0 < cost < Decimal("0.005") else f"{cents} {currency}"
    else:
        text = ""
    if unpriced:
        text += f"{' + ' if text else ''}{_counted(unpriced, 'unpriced step')}"
    return text


def _usage_of(rows: QuerySet[UsageDay], *, reports_usage: bool) -> dict[str, Any]:
    sums = rows.aggregate(
        steps=Sum("steps"),
        unpriced=Sum("unpriced_steps"),
        tokens=Sum(F("input_tokens") + F("output_tokens") + F("cache_read_tokens") + F("cache_write_tokens")),
    )
    costed = rows.exclude(currency="").aggregate(cost=Sum("cost"), last=Max("currency"), first=Min("currency"))
    steps = sums["steps"] or 0
    words = usage_words(
        reports_usage=reports_usage,
        steps=steps,
        unpriced=sums["unpriced"] or 0,
        cost=costed["cost"],
        currency=costed["last"],
        first=costed["first"],
    )
    return {"text": words, "steps": steps, "tokens": sums["tokens"] if steps or reports_usage else None}


def session_usage(*, session: Session) -> dict[str, Any]:
    """The drawer header's usage of one session: its agent's (the runtime's own steps; ``unknown`` where the
    runtime reports none, never 0), and Tess's own model turns in it (``None`` when there were none)."""
    rows = UsageDay.objects.filter(session=session)
    agent = _usage_of(
        rows.filter(provider_instance=session.provider_instance),
        reports_usage=_reports_usage(session.provider_instance),
    )
    tess = _usage_of(rows.exclude(provider_instance=session.provider_instance), reports_usage=True)
    return {"agent": agent, "tess": tess if tess["steps"] else None}


def board_row(session: Session) -> dict[str, Any]:
    """A row as the page renders it and the board socket sends it (times in ISO 8601)."""
    since = session.agent_state_since
    pending = [
        (getattr(session, "pending_cards", 0), "card"),
        (getattr(session, "pending_approvals", 0), "approval"),
        (getattr(session, "pending_handoffs", 0), "hand-off"),
    ]
    return {
        "id": str(session.pk),
        "title": session.title or session.runtime_id,
        "provider": session.provider_instance,
        "owner": session.owner.username,
        "status": session.status,
        "agent_state": session.agent_state,
        "agent_state_since": since.isoformat() if since else None,
        "last_activity": session.updated_at.isoformat(),
        "pending_cards": getattr(session, "pending_cards", 0),
        "pending_approvals": getattr(session, "pending_approvals", 0),
        "pending_handoffs": getattr(session, "pending_handoffs", 0),
        "pending": " · ".join(_counted(n, word) for n, word in pending if n),  # "" when nothing waits
        "usage": usage_text(session),
    }
