"""HTTP side of the metrics: the request-counting middleware and ``GET /metrics``.

``/metrics`` answers only peers inside ``TESS_METRICS_ALLOWED_IPS`` (loopback by default) and only requests
that did not come through a proxy: a reverse proxy on the same machine connects from loopback, so without
that rule every visitor of the public site would be "loopback". Everyone else gets the same 404 as a path
that does not exist.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from .addresses import address_in
from .metrics import HTTP_REQUEST_DURATION, HTTP_REQUESTS, exposition

GetResponse = Callable[[HttpRequest], HttpResponse]

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Headers a proxy adds; a request carrying any of them is not a direct scrape.
_PROXY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")


def _route(request: HttpRequest) -> str:
    """The URL pattern's name (or the pattern itself): one label per route, never per path or id."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return "unmatched"
    return match.view_name or match.route or "unnamed"


class RequestMetricsMiddleware:
    """Counts every response by method, route and status class, and times it."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        elapsed = time.perf_counter() - started
        method = request.method if request.method in _METHODS else "other"
        route = _route(request)
        HTTP_REQUESTS.labels(method=method, route=route, status=f"{response.status_code // 100}xx").inc()
        HTTP_REQUEST_DURATION.labels(method=method, route=route).observe(elapsed)
        return response


def scrape_allowed(request: HttpRequest) -> bool:
    """The direct peer's address is inside ``TESS_METRICS_ALLOWED_IPS`` and no proxy relayed the request."""
    if not settings.TESS_METRICS or any(request.META.get(header) for header in _PROXY_HEADERS):
        return False
    return address_in(str(request.META.get("REMOTE_ADDR") or ""), settings.TESS_METRICS_ALLOWED_IPS)


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: the Prometheus text format, for allowed scrapers only."""
    if not scrape_allowed(request):
        raise Http404
    body, content_type = exposition()
    response = HttpResponse(body, content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
