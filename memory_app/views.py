"""The Memory disclosure page (seed 002), server-rendered inside the admin.

Every action on it (correct, reauthorize, delete one, delete all) parks a card and shows it for an
explicit confirmation; the result shown is the server's, read back from the decided card.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from approvals_app.card_selectors import card_get, cards_visible
from approvals_app.cards import Unavailable, card_confirm, card_dismiss
from tess_site.accounts.scopes import scope_for_credential
from tess_site.context import get_correlation_id
from tess_site.errors import TessError
from tess_site.scope import Scope

from .errors import MemoryUnavailable
from .policy import Category
from .selectors import ERASURE, PROMPT_CEILINGS, category_policy_view, is_active, memory_snapshot
from .services import CARD_KIND, memory_propose

PROPOSAL_FIELDS = ("op", "category", "slot", "value", "ref")


def _scope(request: HttpRequest) -> Scope | None:
    return scope_for_credential(
        user=request.user,
        auth=None,
        session=request.session,
        correlation_id=getattr(request, "correlation_id", None) or get_correlation_id(),
    )


def _page(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    base = {**admin.site.each_context(request), "title": "Memory"}
    response = render(request, template, {**base, **context}, status=status)
    if isinstance(context.get("error"), Unavailable):
        response["Retry-After"] = str(context["error"].retry_after_seconds)
    return response


def _not_a_member(request: HttpRequest) -> HttpResponse:
    return _page(request, "memory/not_member.html", {}, status=403)


def _disclosure(
    request: HttpRequest, scope: Scope, *, error: TessError | None = None, status: int = 200
) -> HttpResponse:
    try:
        snapshot = memory_snapshot(scope=scope)
        pending = list(cards_visible(scope=scope, status="pending", kind=CARD_KIND)[:20])
    except MemoryUnavailable as exc:
        return _page(request, "memory/unavailable.html", {"error": exc}, status=exc.status_code)
    history_by_memory: dict[str, list[Any]] = {}
    for old in snapshot.history:
        history_by_memory.setdefault(str(old.memory_id), []).append(old)
    rows = [
        {"row": row, "active": is_active(row, snapshot.now), "history": history_by_memory.get(str(row.memory_id), [])}
        for row in snapshot.rows
    ]
    context = {
        "snapshot": snapshot,
        "rows": rows,
        "history": snapshot.history,
        "categories": category_policy_view(),
        "prompt_ceilings": PROMPT_CEILINGS,
        "erasure": ERASURE,
        "pending": pending,
        "category_choices": [c.value for c in Category],
        "error": error,
    }
    return _page(request, "memory/disclosure.html", context, status=status)


@require_GET
def disclosure(request: HttpRequest) -> HttpResponse:
    scope = _scope(request)
    if scope is None:
        return _not_a_member(request)
    return _disclosure(request, scope)


@require_POST
def propose(request: HttpRequest) -> HttpResponse:
    scope = _scope(request)
    if scope is None:
        return _not_a_member(request)
    data = {key: request.POST[key] for key in PROPOSAL_FIELDS if request.POST.get(key)}
    try:
        card = memory_propose(scope, data=data)
    except TessError as exc:
        return _disclosure(request, scope, error=exc, status=exc.status_code)
    return redirect("memory:card", card_id=card.id)


@require_GET
def card_page(request: HttpRequest, card_id: UUID) -> HttpResponse:
    scope = _scope(request)
    if scope is None:
        return _not_a_member(request)
    try:
        card = card_get(scope=scope, card_id=card_id)
    except TessError as exc:
        return _page(request, "memory/card.html", {"error": exc}, status=exc.status_code)
    return _page(request, "memory/card.html", {"card": card, "result": card.outcome})


def _decide(request: HttpRequest, card_id: UUID, *, confirm: bool) -> HttpResponse:
    scope = _scope(request)
    if scope is None:
        return _not_a_member(request)
    try:
        if confirm:
            card, result = card_confirm(scope=scope, card_id=card_id)
        else:
            card, result = card_dismiss(scope=scope, card_id=card_id), {"outcome": "dismissed"}
    except TessError as exc:
        return _page(request, "memory/card.html", {"error": exc}, status=exc.status_code)
    return _page(request, "memory/card.html", {"card": card, "result": result})


@require_POST
def confirm(request: HttpRequest, card_id: UUID) -> HttpResponse:
    return _decide(request, card_id, confirm=True)


@require_POST
def dismiss(request: HttpRequest, card_id: UUID) -> HttpResponse:
    return _decide(request, card_id, confirm=False)
