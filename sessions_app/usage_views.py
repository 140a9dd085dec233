"""``/usage/``: what the agents cost, for people: a chart of cost per day stacked by operator or provider, the
sessions' table with sorting, and its CSV export. Behind the admin login; read through the ledger's rule."""

from __future__ import annotations

import csv
from datetime import date, timedelta
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from tess_site.accounts.scopes import scope_for_page

from .budgets import budget_states
from .usage import SESSION_SORTS, usage_by_session, usage_chart

DEFAULT_DAYS = 30
MAX_DAYS = 366
CSV_COLUMNS = (
    "session_id",
    "title",
    "operator",
    "provider",
    "currency",
    "cost",
    "steps",
    "unpriced_steps",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)


def _day(text: str | None, default: date) -> date:
    try:
        return date.fromisoformat(text) if text else default
    except ValueError:
        return default


def _window(request: HttpRequest) -> tuple[date, date]:
    """The days asked for (``since``/``until``, UTC, inclusive); the last 30 by default, at most a year."""
    today = timezone.now().date()
    until = _day(request.GET.get("until"), today)
    since = _day(request.GET.get("since"), until - timedelta(days=DEFAULT_DAYS - 1))
    if since > until:
        since, until = until, since
    return max(since, until - timedelta(days=MAX_DAYS - 1)), until


def _refused(request: HttpRequest) -> HttpResponse:
    context = {**admin.site.each_context(request), "title": "Usage"}
    return render(request, "memory/not_member.html", context, status=403)


@never_cache
@require_GET
def usage_page(request: HttpRequest) -> HttpResponse:
    scope = scope_for_page(request)
    if scope is None:
        return _refused(request)
    since, until = _window(request)
    stack_by = "provider" if request.GET.get("stack") == "provider" else "operator"
    sort = request.GET.get("sort", "cost")
    sort = sort if sort in SESSION_SORTS else "cost"
    context: dict[str, Any] = {
        **admin.site.each_context(request),
        "title": "Usage",
        "since": since,
        "until": until,
        "stack_by": stack_by,
        "sort": sort,
        "sorts": list(SESSION_SORTS),
        "chart": usage_chart(scope=scope, stack_by=stack_by, since=since, until=until),
        "rows": usage_by_session(scope=scope, since=since, until=until, sort=sort),
        "budgets": budget_states(scope=scope),
        "time_zone": scope.tenant.time_zone,
        "window": f"since={since.isoformat()}&until={until.isoformat()}",
    }
    return render(request, "tess/usage.html", context)


@never_cache
@require_GET
def usage_csv(request: HttpRequest) -> HttpResponse:
    """The sessions' table as CSV: one row per session and currency; an unknown cost is an empty cell."""
    scope = scope_for_page(request)
    if scope is None:
        return _refused(request)
    since, until = _window(request)
    rows = usage_by_session(scope=scope, since=since, until=until, sort=request.GET.get("sort", "cost"))
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="tess-usage-{since}-{until}.csv"'
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow(["" if row[column] is None else row[column] for column in CSV_COLUMNS])
    return response
