"""The admin sign-in page, rate-limited: failed attempts are counted per client address and per username.

The drawer and the approval pages sit behind this login, so it is the browser's door to Tess; the API's
token exchange has its own throttle (``TESS_TOKEN_RATE``).
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib import admin
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

_PERIODS = {"s": 1, "sec": 1, "min": 60, "hour": 3600}


def _rate() -> tuple[int, int]:
    count, _, period = settings.TESS_LOGIN_RATE.partition("/")
    return int(count), _PERIODS[period]


def _keys(request: HttpRequest) -> list[str]:
    address = request.META.get("REMOTE_ADDR", "")
    username = request.POST.get("username", "").strip().casefold()
    # Hashed so usernames typed into the form never sit in the cache in clear text.
    digest = hashlib.sha256(username.encode()).hexdigest()[:32]
    return [f"tess:login-fail:addr:{address}", f"tess:login-fail:user:{digest}"]


def login_view(request: HttpRequest) -> HttpResponse:
    """Django's admin login, refusing with 429 once too many attempts failed recently."""
    if request.method != "POST":
        return admin.site.login(request)
    limit, window = _rate()
    keys = _keys(request)
    if any(cache.get(key, 0) >= limit for key in keys):
        response = render(request, "admin/login_throttled.html", {"window_minutes": max(1, window // 60)}, status=429)
        response["Retry-After"] = str(window)
        return response
    response = admin.site.login(request)
    if response.status_code != 302:  # a redirect is a successful sign-in; anything else failed
        for key in keys:
            cache.add(key, 0, window)
            try:
                cache.incr(key)
            except ValueError:  # expired between add and incr
                cache.set(key, 1, window)
    return response
