"""The one-time approval page: ``GET`` shows exactly what would happen, ``POST`` decides.

``GET`` changes nothing but an audit row (mail scanners follow links). ``POST`` needs the bound approver's
own logged-in session and CSRF token. Every refusal is a page with its own status and no state change:
unknown 404, someone else's 403, used or decided 409, expired 410, too many attempts 429. Pages carry
``Referrer-Policy: no-referrer`` so the token never leaks to another site, and are never cached.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.views import redirect_to_login
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.decorators import decorator_from_middleware
from django.utils.timesince import timesince
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from tess_site.accounts.scopes import scope_for_credential
from tess_site.accounts.selectors import roles_for
from tess_site.context import get_correlation_id
from tess_site.errors import InvalidInput, TessError
from tess_site.scope import Channel, Scope

from .approvals import ApprovalLinkNotYours, display_status
from .briefs import describe
from .decisions import approval_decide, approval_link_viewed, link_for_token
from .models import ApprovalLink


class ApprovalRateLimited(TessError):
    code = "rate_limited"
    status_code = 429
    default_message = "Too many attempts; wait a minute and try again. Nothing was done."


_PERIODS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600}


def _rate() -> tuple[int, int]:
    count, _, period = str(settings.TESS_APPROVAL_RATE).partition("/")
    return int(count), _PERIODS.get(period or "min", 60)


def _over_limit(request: HttpRequest) -> bool:
    """Count this attempt per client address and per person; True once either is over the rate."""
    limit, period = _rate()
    window = int(time.time() // period)
    keys = [f"approvals:rate:ip:{request.META.get('REMOTE_ADDR', '-')}:{window}"]
    if request.user.is_authenticated:
        keys.append(f"approvals:rate:user:{request.user.pk}:{window}")
    over = False
    for key in keys:
        cache.add(key, 0, timeout=period + 1)
        try:
            over = cache.incr(key) > limit or over
        except ValueError:  # expired between add and incr
            cache.set(key, 1, timeout=period + 1)
    return over


def _page(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    base = {**admin.site.each_context(request), "title": "Approval"}
    response = render(request, template, {**base, **context}, status=status)
    response["Referrer-Policy"] = "no-referrer"
    return response


def _refusal(request: HttpRequest, error: TessError, link: ApprovalLink | None = None) -> HttpResponse:
    context: dict[str, Any] = {"error": error, "approval": None}
    if link is not None and _is_mine(request, link):
        context.update(approval=link.approval, status=display_status(link.approval))
    return _page(request, "approvals/refused.html", context, status=error.status_code)


def _is_mine(request: HttpRequest, link: ApprovalLink) -> bool:
    return bool(request.user.is_authenticated and link.approver_id == request.user.pk)


def _link_scope(request: HttpRequest, link: ApprovalLink) -> Scope:
    """The approver's Scope in the approval's tenant (whatever tenant the browser session has selected)."""
    base = scope_for_credential(
        user=request.user,
        auth=None,
        session=request.session,
        correlation_id=getattr(request, "correlation_id", None) or get_correlation_id(),
        channel=Channel.WEB,
    )
    tenant = link.approval.tenant
    roles = roles_for(user=request.user, tenant=tenant)
    if base is None or not roles or link.approver_id != request.user.pk:
        raise ApprovalLinkNotYours()
    return base.with_tenant(tenant, roles)


class _NoReferrerCsrf(CsrfViewMiddleware):
    """Django's CSRF protection, accepting the ``Origin: null`` a browser sends from a no-referrer page.

    Under ``Referrer-Policy: no-referrer`` a browser posts the Approve/Deny form with ``Origin: null`` and no
    ``Referer``, which the stock origin check refuses. The CSRF token (form value against cookie) is still
    required, any real foreign Origin is still refused, and the session cookie is SameSite=Lax besides.
    """

    def _origin_verified(self, request: HttpRequest) -> bool:
        if request.META.get("HTTP_ORIGIN") == "null":
            return True
        return bool(super()._origin_verified(request))  # type: ignore[misc]  # not in the stubs


_csrf_protect_no_referrer: Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]] = (
    decorator_from_middleware(_NoReferrerCsrf)  # type: ignore[assignment]
)


@csrf_exempt  # the site-wide check is replaced by _NoReferrerCsrf below, never skipped
@never_cache
@require_http_methods(["GET", "POST"])
@_csrf_protect_no_referrer
def approval_page(request: HttpRequest, token: str) -> HttpResponse:
    if _over_limit(request):
        error = ApprovalRateLimited()
        response = _page(request, "approvals/refused.html", {"error": error}, status=429)
        response["Retry-After"] = str(_rate()[1])
        return response
    if not request.user.is_authenticated:
        response = redirect_to_login(request.get_full_path(), reverse("admin:login"))
        response["Referrer-Policy"] = "no-referrer"
        return response
    link: ApprovalLink | None = None
    try:
        link = link_for_token(token)
        scope = _link_scope(request, link)
        if request.method == "GET":
            approval_link_viewed(scope, link=link)
            return _show(request, link)
        decision = request.POST.get("decision", "")
        if decision not in ("approve", "deny"):
            raise InvalidInput("Choose approve or deny.", details={"field": "decision"})
        approval = approval_decide(
            scope, token=token, approve=decision == "approve", reason=request.POST.get("reason", "")
        )
    except InvalidInput as exc:
        if link is not None and _is_mine(request, link):
            return _show(request, link, error=exc, status=exc.status_code)
        return _refusal(request, exc, link)
    except TessError as exc:
        return _refusal(request, exc, link)
    return _page(request, "approvals/decided.html", {"approval": approval, "status": display_status(approval)})


def ago(moment: datetime) -> str:
    """ "just now" or "5 minutes ago": how long ago ``moment`` was, to the largest unit."""
    if (timezone.now() - moment).total_seconds() < 60:
        return "just now"
    return f"{timesince(moment, timezone.now(), depth=1)} ago"


def time_left(expires_at: datetime) -> str:
    """The time an approver has left, as the countdown script words it (the page reads right without it)."""
    seconds = int((expires_at - timezone.now()).total_seconds())
    if seconds <= 0:
        return "expired"
    return f"{seconds // 60} min {seconds % 60} s left"


def _show(
    request: HttpRequest, link: ApprovalLink, *, error: TessError | None = None, status: int = 200
) -> HttpResponse:
    approval = link.approval
    context = {
        "approval": approval,
        "brief": describe(approval),
        "time_left": time_left(approval.expires_at),
        "requested_ago": ago(approval.created_at),
        "parameters_json": json.dumps(approval.parameters, indent=2, sort_keys=True),
        "requester": approval.requester.get_username(),
        "expires_iso": approval.expires_at.isoformat(),
        "error": error,
    }
    return _page(request, "approvals/page.html", context, status=status)
