"""The Scope is derived from the verified credential only: session, token (websockets: tests/tess_site)."""

from __future__ import annotations

import dataclasses

import pytest
from django.contrib.sessions.models import Session as BrowserSession
from django.db import connection
from rest_framework.test import APIClient

from tess_site.accounts import services
from tess_site.accounts.models import Membership, PersonalToken
from tess_site.scope import Channel, Role, Scope
from tests.api.test_error_envelope import assert_envelope
from tests.conftest import AUDIT_TABLE, csrf_token

pytestmark = pytest.mark.django_db


def database_state() -> tuple[object, ...]:
    """What a refused request must leave as it was: sign-in sessions (the selected tenant lives there),
    memberships, tokens and the audit feed."""
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT count(*) FROM "{AUDIT_TABLE}"')
        audited = cursor.fetchone()
    return (
        sorted(BrowserSession.objects.values_list("session_key", "session_data")),
        sorted(Membership.objects.values_list("tenant_id", "user_id", "role")),
        sorted(PersonalToken.objects.values_list("pk", "tenant_id", "revoked_at")),
        audited,
    )


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


@pytest.mark.parametrize(
    ("credential", "refusal"),
    [("browser", "CSRF"), ("token", "make a token for the other tenant")],
    ids=["session-write-without-csrf", "token-cannot-switch-tenants"],
)
def test_switching_tenants_is_refused_without_the_csrf_token_and_for_a_token(
    cast, browser_as, api_as, credential, refusal
):
    services.membership_grant(tenant=cast.globex, user=cast.owner, role=Role.OPERATOR)
    client = browser_as(cast.owner) if credential == "browser" else api_as(cast.owner)
    before = database_state()
    response = client.post("/api/v1/me/tenant/", {"slug": "globex"}, format="json")
    body = assert_envelope(response, 403, "permission_denied")
    assert refusal in body["error"]["message"]
    assert database_state() == before
    assert client.get("/api/v1/me/").json()["tenant_slug"] == "acme"


def test_a_token_is_bound_to_the_tenant_it_was_made_for(cast, api_as):
    services.membership_grant(tenant=cast.globex, user=cast.owner, role=Role.APPROVER)
    body = api_as(cast.owner, cast.globex).get("/api/v1/me/").json()
    assert body["tenant_slug"] == "globex" and body["roles"] == ["approver"]


def test_a_user_with_no_tenant_is_refused(db):
    user, _ = services.user_ensure(username="loner", password="loner-pass-1234")
    client = APIClient()
    client.force_login(user)
    before = database_state()
    response = client.get("/api/v1/me/")
    body = assert_envelope(response, 403, "permission_denied")
    assert body["error"]["message"] == "You are not a member of this tenant."
    assert database_state() == before


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
