"""The Scope is derived from the verified credential only: session, token (websockets: tests/tess_site)."""

from __future__ import annotations

import dataclasses

import pytest
from rest_framework.test import APIClient

from tess_site.accounts import services
from tess_site.scope import Channel, Role, Scope
from tests.conftest import csrf_token

pytestmark = pytest.mark.django_db


def test_a_browser_session_gets_the_web_channel_and_its_first_tenant(cast, browser_as):
    body = browser_as(cast.owner).get("/api/v1/me/").json()
    assert body["channel"] == "web" and body["tenant_slug"] == "acme" and body["username"] == "owner"


def test_a_browser_session_selects_one_of_its_own_tenants(cast, browser_as):
    services.membership_grant(tenant=cast.globex, user=cast.owner, role=Role.APPROVER)
    client = browser_as(cast.owner)
    csrf = csrf_token(client)
    response = client.post("/api/v1/me/tenant/", {"slug": "globex"}, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 200 and response.json()["roles"] == ["approver"]
    assert client.get("/api/v1/me/").json()["tenant_slug"] == "globex"


def test_a_browser_session_cannot_select_a_tenant_it_does_not_belong_to(cast, browser_as):
    client = browser_as(cast.owner)
    csrf = csrf_token(client)
    response = client.post("/api/v1/me/tenant/", {"slug": "globex"}, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 404
    assert client.get("/api/v1/me/").json()["tenant_slug"] == "acme"


def test_session_writes_need_the_csrf_token(cast, browser_as):
    response = browser_as(cast.owner).post("/api/v1/me/tenant/", {"slug": "acme"}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_a_token_cannot_switch_tenants(cast, api_as):
    services.membership_grant(tenant=cast.globex, user=cast.owner, role=Role.OPERATOR)
    response = api_as(cast.owner).post("/api/v1/me/tenant/", {"slug": "globex"}, format="json")
    assert response.status_code == 403


def test_a_token_is_bound_to_the_tenant_it_was_made_for(cast, api_as):
    services.membership_grant(tenant=cast.globex, user=cast.owner, role=Role.APPROVER)
    body = api_as(cast.owner, cast.globex).get("/api/v1/me/").json()
    assert body["tenant_slug"] == "globex" and body["roles"] == ["approver"]


def test_a_user_with_no_tenant_is_refused(db):
    user, _ = services.user_ensure(username="loner", password="loner-pass-1234")
    client = APIClient()
    client.force_login(user)
    response = client.get("/api/v1/me/")
    assert response.status_code == 403


def test_an_anonymous_request_is_refused_with_the_envelope(db):
    response = APIClient().get("/api/v1/me/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_the_scope_is_immutable(cast):
    scope = Scope(tenant=cast.acme, actor=cast.owner, channel=Channel.WEB, correlation_id="c" * 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        scope.actor = cast.outsider


def test_only_system_scopes_may_have_no_actor(cast):
    with pytest.raises(ValueError, match="system"):
        Scope(tenant=cast.acme, actor=None, channel=Channel.WEB, correlation_id="c" * 8)
