"""Content-Security-Policy on every response: everything comes from Tess itself, and no inline script runs.

The drawer and every page load their JavaScript and CSS as static files from this origin; websockets go
to this origin too (``'self'`` covers ``ws:``/``wss:`` of the same host in CSP Level 3). Inline ``style``
attributes stay allowed because the Django admin's own templates use them; inline ``<script>`` never is.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

# The one inline <style> block of drf-spectacular's Swagger page (/api/docs/: box-sizing and background), by
# hash; tests/browser/test_admin_pages.py fails if an upgrade changes it.
SWAGGER_STYLE_HASH = "'sha256-MMpT0iDxyjALd9PdfepImGX3DBfJPXZ4IlDWdPAgtn0='"

DEFAULT_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        f"style-src 'self' {SWAGGER_STYLE_HASH}",
        "style-src-attr 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    """Sets ``Content-Security-Policy`` (``TESS_CSP`` overrides the policy) unless a view set its own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = getattr(settings, "TESS_CSP", "") or DEFAULT_POLICY
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response
