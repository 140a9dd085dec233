"""``/inbox/``: the server-rendered inbox, behind the admin login, with its actions as plain forms.

Every action is a POST with the CSRF token. "Open approval page" mints a fresh one-time link for the signed-in
approver and redirects their browser to it (303); the link itself is never written into the page.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from tess_site.accounts.scopes import scope_for_page
from tess_site.errors import TessError

from .cards import card_confirm, card_dismiss
from .links import approval_link_open, approval_resend
from .notifications import CHANNELS, preferences_get, preferences_update, push_subscription_count, vapid_public_key
from .waiting import inbox_of

SECTIONS = [
    ("approval_to_decide", "Approvals for you to decide"),
    ("session_waiting", "Sessions waiting for your input"),
    ("card", "Cards to confirm"),
    ("budget", "Budgets near or at their limit"),
    ("approval_requested", "Approvals you requested"),
]
CHANNEL_LABELS = {
    "browser": "Browser notification from the open drawer",
    "webpush": "Web Push to my subscribed browsers",
    "email": "E-mail",
    "discord": "Discord direct message",
}


def _not_a_member(request: HttpRequest) -> HttpResponse:
    context = {**admin.site.each_context(request), "title": "Inbox"}
    return render(request, "memory/not_member.html", context, status=403)


@never_cache
@require_GET
def inbox_page(request: HttpRequest) -> HttpResponse:
    scope = scope_for_page(request)
    if scope is None:
        return _not_a_member(request)
    items = inbox_of(scope=scope)
    prefs = preferences_get(scope=scope)
    sections = [(kind, title, [i for i in items if i["kind"] == kind]) for kind, title in SECTIONS]
    context: dict[str, Any] = {
        **admin.site.each_context(request),
        "title": "Inbox",
        "count": len(items),
        "sections": sections,
        "channels": [(name, CHANNEL_LABELS[name], getattr(prefs, name)) for name in CHANNELS],
        "vapid_public_key": vapid_public_key(),
        "push_subscriptions": push_subscription_count(scope=scope),
    }
    return render(request, "approvals/inbox.html", context)


def _back(request: HttpRequest, error: TessError | None = None, done: str = "") -> HttpResponseRedirect:
    if error is not None:
        messages.error(request, f"Nothing was done: {error.message}")
    elif done:
        messages.success(request, done)
    return redirect("inbox:page")


@require_POST
def open_approval(request: HttpRequest, approval_id: UUID) -> HttpResponse:
    scope = scope_for_page(request)
    if scope is None:
        return _not_a_member(request)
    try:
        url = approval_link_open(scope, approval_id=approval_id)
    except TessError as exc:
        return _back(request, exc)
    response = HttpResponseRedirect(url, status=303)
    response["Referrer-Policy"] = "no-referrer"
    return response


@require_POST
def resend_approval(request: HttpRequest, approval_id: UUID) -> HttpResponse:
    scope = scope_for_page(request)
    if scope is None:
        return _not_a_member(request)
    try:
        sent = approval_resend(scope, approval_id=approval_id)
    except TessError as exc:
        return _back(request, exc)
    return _back(request, done=f"Sent a fresh link to {sent} approver{'s' if sent != 1 else ''}.")


def _card(request: HttpRequest, card_id: UUID, *, confirm: bool) -> HttpResponse:
    scope = scope_for_page(request)
    if scope is None:
        return _not_a_member(request)
    try:
        if confirm:
            _, result = card_confirm(scope=scope, card_id=card_id)
        else:
            card_dismiss(scope=scope, card_id=card_id)
            result = {"outcome": "dismissed"}
    except TessError as exc:
        return _back(request, exc)
    return _back(request, done=f"Card {result.get('outcome', 'decided')}.")


@require_POST
def confirm_card(request: HttpRequest, card_id: UUID) -> HttpResponse:
    return _card(request, card_id, confirm=True)


@require_POST
def dismiss_card(request: HttpRequest, card_id: UUID) -> HttpResponse:
    return _card(request, card_id, confirm=False)


@require_POST
def settings_form(request: HttpRequest) -> HttpResponse:
    scope = scope_for_page(request)
    if scope is None:
        return _not_a_member(request)
    preferences_update(scope=scope, changes={name: request.POST.get(name) == "on" for name in CHANNELS})
    return _back(request, done="Notification settings saved.")
