"""The admin sign-in page, rate-limited: failed attempts are counted per client address and per username.

The drawer and the approval pages sit behind this login, so it is the browser's door to Tess; the API's
token exchange counts its failures the same way (``tess_site.accounts.limits``).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from .limits import FailureLimit


def login_view(request: HttpRequest) -> HttpResponse:
    """Django's admin login, refusing with 429 once too many attempts failed recently."""
    if request.method != "POST":
        return admin.site.login(request)
    limit = FailureLimit("login", settings.TESS_LOGIN_RATE)
    who = {"address": request.META.get("REMOTE_ADDR", ""), "username": request.POST.get("username", "")}
    if limit.blocked(**who):
        response = render(
            request, "admin/login_throttled.html", {"window_minutes": max(1, limit.window // 60)}, status=429
        )
        response["Retry-After"] = str(limit.window)
        return response
    response = admin.site.login(request)
    if response.status_code != 302:  # a redirect is a successful sign-in; anything else failed
        limit.record_failure(**who)
    return response
