"""One error envelope for the whole API: no HTML pages, no stack traces, stable codes."""

from __future__ import annotations

import pytest
from django.urls import path
from rest_framework.test import APIClient

from tess_site import urls as root_urls

pytestmark = pytest.mark.django_db


def _boom(request):  # a view that fails unexpectedly
    raise RuntimeError("internal detail that must not leak")


urlpatterns = [path("api/v1/boom/", _boom), *root_urls.urlpatterns]
handler404 = root_urls.handler404
handler500 = root_urls.handler500


def assert_envelope(response, status: int, code: str) -> dict:
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "correlation_id", "details"}
    assert body["error"]["code"] == code
    assert body["error"]["correlation_id"] == response["X-Correlation-ID"]
    return body


def test_an_unknown_api_path_is_a_json_404(cast, api_as):
    assert_envelope(api_as(cast.owner).get("/api/v1/no-such-thing/"), 404, "not_found")


@pytest.mark.parametrize("path", ["/api/v1/no-such-thing/", "/api/nothing-here", "/api/v1/sessions/not-an-id/x/"])
def test_an_unknown_api_path_is_a_json_404_with_debug_on(cast, api_as, settings, path):
    # `make run` has DEBUG on; Django's debug 404 page (which lists the URL patterns) must not reach /api/.
    settings.DEBUG = True
    body = assert_envelope(api_as(cast.owner).get(path), 404, "not_found")
    assert "urlpatterns" not in str(body) and "api/v1/" not in body["error"]["message"]


def test_a_wrong_method_is_a_json_405(cast, api_as):
    assert_envelope(api_as(cast.owner).delete("/api/v1/me/"), 405, "method_not_allowed")


def test_malformed_json_is_a_parse_error(cast, api_as):
    response = api_as(cast.owner).post("/api/v1/auth/token/", "{not json", content_type="application/json")
    assert_envelope(response, 400, "parse_error")


def test_validation_errors_name_the_fields(cast, api_as):
    body = assert_envelope(api_as(cast.owner).post("/api/v1/auth/token/", {}, format="json"), 400, "validation_error")
    assert set(body["error"]["details"]["fields"]) == {"username", "password"}


def test_an_unexpected_error_is_a_json_500_without_a_stack_trace(cast, settings):
    settings.ROOT_URLCONF = __name__
    client = APIClient(raise_request_exception=False)
    response = client.get("/api/v1/boom/")
    body = assert_envelope(response, 500, "server_error")
    assert "internal detail" not in response.content.decode()
    assert "Traceback" not in response.content.decode()
    assert body["error"]["message"]


def test_a_valid_correlation_id_is_echoed(cast, api_as):
    response = api_as(cast.owner).get("/api/v1/no-such-thing/", HTTP_X_CORRELATION_ID="trace-1234-abcd")
    assert response["X-Correlation-ID"] == "trace-1234-abcd"
    assert response.json()["error"]["correlation_id"] == "trace-1234-abcd"


def test_a_malformed_correlation_id_is_replaced(cast, api_as):
    response = api_as(cast.owner).get("/api/v1/me/", HTTP_X_CORRELATION_ID="bad id\nwith newline")
    assert response["X-Correlation-ID"] != "bad id\nwith newline"
    assert len(response["X-Correlation-ID"]) == 32


def test_the_openapi_schema_and_docs_are_served_locally(db):
    client = APIClient()
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/v1/audit/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "cdn" not in html.lower() and "unpkg" not in html.lower() and "jsdelivr" not in html.lower()
