"""``/board/``: the fleet board, behind the admin login. Filters and pages are plain GET parameters; the page
then follows ``/ws/board/`` for row changes (static/tess/board.js)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from tess_site.accounts.scopes import scope_for_page

from .board import AGENT_STATES, BoardFilters, board_owners, board_page, board_providers, board_row


def _filters(request: HttpRequest) -> BoardFilters:
    """What the form asked for; a value outside the choices is ignored (the page shows every session)."""
    get = request.GET
    state = get.get("agent_state", "")
    return BoardFilters(
        agent_state=state if state in AGENT_STATES else "",
        provider=get.get("provider", "")[:64],
        owner=get.get("owned_by", "")[:150],
        q=get.get("q", "").strip()[:200],
        ended=get.get("ended") == "1",
    )


@never_cache
@require_GET
def board(request: HttpRequest) -> HttpResponse:
    scope = scope_for_page(request)
    if scope is None:
        refused = {**admin.site.each_context(request), "title": "Fleet board"}
        return render(request, "memory/not_member.html", refused, status=403)
    filters = _filters(request)
    try:
        number = max(1, int(request.GET.get("page", "1")))
    except ValueError:
        number = 1
    page = board_page(scope=scope, filters=filters, number=number)
    query = request.GET.copy()
    query.pop("page", None)
    context: dict[str, Any] = {
        **admin.site.each_context(request),
        "title": "Fleet board",
        "page": page,
        "rows": [board_row(session) for session in page.object_list],
        "filters": filters,
        "states": AGENT_STATES,
        "providers": board_providers(scope=scope),
        "owners": board_owners(scope=scope),
        "query": query.urlencode(),
        "filtered": bool(filters.agent_state or filters.provider or filters.owner or filters.q),
    }
    return render(request, "tess/board.html", context)
