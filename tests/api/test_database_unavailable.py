"""A database failure mid-request is a typed 503 with ``Retry-After``, never a 500.

The process-level proof (connections terminated under load on two nodes) is ``make test-cluster``; these
pin the mapping for a DRF view and for a plain Django view under ``/api/``.
"""

from __future__ import annotations

import pytest
from django.db import InterfaceError, OperationalError
from django.urls import path
from rest_framework.test import APIClient

from sessions_app import selectors
from tess_site import urls as root_urls

from .test_error_envelope import assert_envelope

pytestmark = pytest.mark.django_db


def _plain_view_losing_its_connection(request):
    raise InterfaceError("connection already closed")


def _page_losing_its_connection(request):
    raise OperationalError("FATAL: sorry, too many clients already")


urlpatterns = [
    path("api/v1/plain-db-failure/", _plain_view_losing_its_connection),
    path("pages/db-failure/", lambda request: _page_losing_its_connection(request)),
    *root_urls.urlpatterns,
]
handler404 = root_urls.handler404
handler500 = root_urls.handler500


@pytest.mark.parametrize("error", [OperationalError, InterfaceError])
def test_a_dropped_connection_in_an_api_view_is_a_typed_503_with_retry_after(cast, api_as, monkeypatch, error):
    def dropped(**kwargs):
        raise error("server closed the connection unexpectedly")

    monkeypatch.setattr(selectors, "sessions_visible", dropped)
    response = api_as(cast.owner).get("/api/v1/sessions/")
    body = assert_envelope(response, 503, "database_unavailable")
    assert int(response["Retry-After"]) >= 1
    assert body["error"]["details"] == {"retry_after_seconds": int(response["Retry-After"])}
    assert "server closed" not in response.content.decode()


def test_a_dropped_connection_outside_drf_is_a_typed_503_too(cast, settings):
    settings.ROOT_URLCONF = __name__
    response = APIClient(raise_request_exception=False).get("/api/v1/plain-db-failure/")
    assert_envelope(response, 503, "database_unavailable")
    assert int(response["Retry-After"]) >= 1


def test_other_unexpected_errors_stay_a_500(cast, api_as, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("a bug, not an outage")

    monkeypatch.setattr(selectors, "sessions_visible", broken)
    client = api_as(cast.owner)
    client.raise_request_exception = False
    response = client.get("/api/v1/sessions/")
    assert_envelope(response, 500, "server_error")
    assert not response.has_header("Retry-After")


@pytest.mark.parametrize("error", [OperationalError, InterfaceError])
def test_the_approval_page_answers_503_with_retry_after_when_the_database_is_gone(cast, monkeypatch, error):
    from approvals_app import views as approval_views

    def gone(*args, **kwargs):
        raise error("FATAL: sorry, too many clients already")

    monkeypatch.setattr(approval_views, "link_for_token", gone)
    monkeypatch.setattr(approval_views, "approval_link_viewed", gone)
    client = APIClient(raise_request_exception=False)
    client.force_login(cast.approver)
    for method in (client.get, client.post):
        response = method("/approvals/" + "t" * 43 + "/")
        assert response.status_code == 503, response.content[:300]
        assert int(response["Retry-After"]) >= 1
        html = response.content.decode()
        assert "briefly unavailable" in html and "too many clients" not in html


def test_any_page_answers_503_not_500_when_the_database_is_gone(cast, settings):
    settings.ROOT_URLCONF = __name__
    response = APIClient(raise_request_exception=False).get("/pages/db-failure/")
    assert response.status_code == 503 and "briefly unavailable" in response.content.decode()
    assert response["Content-Type"].startswith("text/html")
