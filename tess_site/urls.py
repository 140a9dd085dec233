"""Root URLs: the admin, the API under /api/v1/, OpenAPI, and health."""

import sys

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.urls import URLPattern, URLResolver, include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from .accounts.login import login_view
from .audit_api import AuditListView
from .context import get_correlation_id
from .errors import DATABASE_ERRORS, database_unavailable, error_response, service_unavailable_response
from .health import HealthView, healthz
from .metrics_http import metrics_view
from .middleware import API_PREFIX

api_v1: list[URLPattern | URLResolver] = [
    path("", include("tess_site.accounts.api.urls")),
    path("audit/", AuditListView.as_view(), name="audit-list"),
    path("", include("approvals_app.api.urls")),
    path("", include("approvals_app.api.card_urls")),
    path("", include("memory_app.api.urls")),
    path("", include("sessions_app.api.urls")),
    path("", include("providers_app.api.urls")),
    path("health/", HealthView.as_view(), name="health"),
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),  # Prometheus; allowed addresses only
    path("admin/login/", login_view, name="tess-login"),  # rate-limited; before the admin's own route
    path("admin/", admin.site.urls),
    path("memory/", include("memory_app.urls")),
    path("approvals/", include("approvals_app.urls")),
    path("inbox/", include("approvals_app.inbox_urls")),
    path("board/", include("sessions_app.board_urls")),
    path("usage/", include("sessions_app.usage_urls")),
    path("", include("sessions_app.discord.urls")),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="docs"),
]


def _json_or_default(default_view, code: str, message: str, status: int):
    def handler(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if request.path.startswith(API_PREFIX):
            return error_response(code, message, status)
        return default_view(request, *args, **kwargs)

    return handler


from django.views import defaults  # noqa: E402

handler404 = _json_or_default(defaults.page_not_found, "not_found", "Not found.", 404)
_server_error = _json_or_default(defaults.server_error, "server_error", "Something went wrong on our side.", 500)


def handler500(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
    """A database that does not answer is an outage, not a bug: 503 with ``Retry-After`` on every page.

    Django calls this while handling the exception, so it is still at hand; pages render without touching the
    database (no context processors) and the API answers its envelope.
    """
    exc = sys.exc_info()[1]
    if not isinstance(exc, DATABASE_ERRORS):
        return _server_error(request, *args, **kwargs)
    err = database_unavailable(exc)
    if request.path.startswith(API_PREFIX):
        return service_unavailable_response(err)
    html = render_to_string(
        "503.html",
        {
            "retry_after": err.retry_after_seconds,
            "static_url": settings.STATIC_URL,
            "correlation_id": get_correlation_id(),
        },
    )
    response = HttpResponse(html, status=503)
    response["Retry-After"] = str(err.retry_after_seconds)
    return response


handler403 = _json_or_default(defaults.permission_denied, "permission_denied", "Permission denied.", 403)
handler400 = _json_or_default(defaults.bad_request, "bad_request", "Bad request.", 400)
