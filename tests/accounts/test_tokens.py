"""Personal access tokens: hashed at rest, shown once, refused when revoked, expired or forged."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from tess_site.accounts import services, tokens
from tess_site.accounts.models import PersonalToken
from tess_site.audit.models import AuditEvent
from tests.conftest import scope_of

pytestmark = pytest.mark.django_db


def me(token: str) -> tuple[int, dict]:
    client = APIClient()
    response = client.get("/api/v1/me/", HTTP_AUTHORIZATION=f"Bearer {token}")
    return response.status_code, response.json()


def test_the_token_is_stored_only_as_a_hash(cast, token_for):
    plaintext = token_for(cast.owner)
    row = PersonalToken.objects.get(user=cast.owner)
    assert row.token_hash == tokens.digest(plaintext)
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM accounts_personaltoken")
        stored = " ".join(str(v) for row in cursor.fetchall() for v in row)
    assert plaintext not in stored
    secret = plaintext.split("_", 2)[2]  # tess_<prefix>_<secret>; the secret itself may hold "_"
    assert secret not in stored  # the secret part appears nowhere


def test_a_valid_token_authenticates_as_its_holder_in_its_tenant(cast, token_for):
    status, body = me(token_for(cast.owner))
    assert status == 200
    assert body["username"] == "owner" and body["tenant_slug"] == "acme" and body["channel"] == "cli"
    assert body["roles"] == ["operator"]


def test_it_refuses_a_revoked_token(cast, token_for):
    plaintext = token_for(cast.owner)
    token = PersonalToken.objects.get(user=cast.owner)
    assert services.token_revoke(scope=scope_of(cast.owner, cast.acme), token=token) is True
    status, body = me(plaintext)
    assert status == 401
    assert body["error"]["code"] == "authentication_failed"


def test_revoking_twice_reports_no_change(cast, token_for):
    token_for(cast.owner)
    token = PersonalToken.objects.get(user=cast.owner)
    scope = scope_of(cast.owner, cast.acme)
    assert services.token_revoke(scope=scope, token=token) is True
    assert services.token_revoke(scope=scope, token=token) is False


def test_it_refuses_an_expired_token(cast, token_for):
    plaintext = token_for(cast.owner)
    PersonalToken.objects.filter(user=cast.owner).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert me(plaintext)[0] == 401


def test_it_refuses_a_forged_token_with_a_real_prefix(cast, token_for):
    plaintext = token_for(cast.owner)
    prefix = plaintext.split("_")[1]
    forged = f"tess_{prefix}_{'A' * 43}"
    status, body = me(forged)
    assert status == 401 and body["error"]["code"] == "authentication_failed"


def test_it_refuses_the_token_of_a_deactivated_user(cast, token_for):
    plaintext = token_for(cast.owner)
    cast.owner.is_active = False
    cast.owner.save()
    assert me(plaintext)[0] == 401


def test_it_refuses_a_token_whose_holder_left_the_tenant(cast, token_for):
    plaintext = token_for(cast.owner)
    cast.owner.tess_memberships.all().delete()
    status, body = me(plaintext)
    assert status == 403 and body["error"]["code"] == "permission_denied"


def test_a_token_in_the_query_string_is_not_a_credential(cast, token_for):
    plaintext = token_for(cast.owner)
    response = APIClient().get(f"/api/v1/me/?access_token={plaintext}")
    assert response.status_code == 401


def test_use_records_last_used_time(cast, token_for):
    plaintext = token_for(cast.owner)
    assert PersonalToken.objects.get(user=cast.owner).last_used_at is None
    me(plaintext)
    assert PersonalToken.objects.get(user=cast.owner).last_used_at is not None


def test_issuing_and_revoking_are_audited_without_the_token(cast, token_for):
    plaintext = token_for(cast.owner)
    token = PersonalToken.objects.get(user=cast.owner)
    services.token_revoke(scope=scope_of(cast.owner, cast.acme), token=token)
    actions = list(AuditEvent.objects.filter(tenant=cast.acme).values_list("action", flat=True))
    assert actions == ["token.issue", "token.revoke"]
    dumped = str(list(AuditEvent.objects.values()))
    assert plaintext not in dumped and token.token_hash not in dumped


def test_only_an_admin_makes_a_token_for_someone_else(cast):
    from tess_site.errors import Forbidden

    with pytest.raises(Forbidden):
        services.token_issue(scope=scope_of(cast.teammate, cast.acme), holder=cast.owner, name="x")
    issued = services.token_issue(scope=scope_of(cast.admin_user, cast.acme), holder=cast.owner, name="x")
    assert issued.token.user == cast.owner


def test_a_token_cannot_be_made_for_a_non_member(cast):
    from tess_site.errors import InvalidInput

    with pytest.raises(InvalidInput):
        services.token_issue(scope=scope_of(cast.admin_user, cast.acme), holder=cast.outsider, name="x")


class TestTokenExchange:
    url = "/api/v1/auth/token/"

    def test_a_password_is_exchanged_for_a_token_shown_once(self, cast):
        response = APIClient().post(self.url, {"username": "owner", "password": "owner-pass-1234"}, format="json")
        assert response.status_code == 201
        body = response.json()
        assert body["tenant_slug"] == "acme" and body["token"].startswith("tess_")
        assert response["Cache-Control"] == "no-store"
        assert me(body["token"])[0] == 200

    def test_a_wrong_password_gets_no_token(self, cast):
        response = APIClient().post(self.url, {"username": "owner", "password": "nope"}, format="json")
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "invalid_credentials"
        assert not PersonalToken.objects.exists()

    def test_a_member_of_several_tenants_must_name_one(self, cast):
        services.membership_grant(tenant=cast.globex, user=cast.owner, role=services.Role.OPERATOR)
        client = APIClient()
        response = client.post(self.url, {"username": "owner", "password": "owner-pass-1234"}, format="json")
        assert response.status_code == 400
        assert response.json()["error"]["details"]["tenant_slugs"] == ["acme", "globex"]
        response = client.post(
            self.url, {"username": "owner", "password": "owner-pass-1234", "tenant_slug": "globex"}, format="json"
        )
        assert response.status_code == 201 and response.json()["tenant_slug"] == "globex"

    def test_naming_a_tenant_you_do_not_belong_to_is_refused(self, cast):
        response = APIClient().post(
            self.url, {"username": "owner", "password": "owner-pass-1234", "tenant_slug": "globex"}, format="json"
        )
        assert response.status_code == 403

    def test_it_is_rate_limited(self, cast, settings):
        client = APIClient()
        codes = [
            client.post(self.url, {"username": "owner", "password": "wrong"}, format="json").status_code
            for _ in range(11)
        ]
        assert codes[:10] == [401] * 10
        assert codes[10] == 429
        body = client.post(self.url, {"username": "owner", "password": "owner-pass-1234"}, format="json").json()
        assert body["error"]["code"] == "throttled" and body["error"]["details"]["retry_after_seconds"] > 0


class TestGuessingThroughForwardedHeaders:
    """The token exchange's limits hold however the client dresses its address."""

    url = "/api/v1/auth/token/"

    def attempt(self, client: APIClient, *, peer: str, forwarded: str | None = None, username: str = "owner") -> int:
        extra: dict[str, Any] = {"REMOTE_ADDR": peer}
        if forwarded is not None:
            extra["HTTP_X_FORWARDED_FOR"] = forwarded
        return client.post(self.url, {"username": username, "password": "wrong"}, format="json", **extra).status_code

    def test_a_client_rotating_x_forwarded_for_is_still_one_address(self, cast, settings):
        client = APIClient()
        codes = [
            self.attempt(client, peer="203.0.113.5", forwarded=f"198.51.100.{i}", username=f"user{i}")
            for i in range(11)
        ]
        assert codes[:10] == [401] * 10 and codes[10] == 429

    def test_guesses_at_one_username_from_many_addresses_behind_the_proxy_are_limited(self, cast):
        client = APIClient()
        codes = [self.attempt(client, peer="127.0.0.1", forwarded=f"198.51.100.{i}") for i in range(11)]
        assert codes[:10] == [401] * 10 and codes[10] == 429
        # Even the right password waits now: the account is being guessed at.
        right = client.post(
            self.url,
            {"username": "owner", "password": "owner-pass-1234"},
            format="json",
            REMOTE_ADDR="127.0.0.1",
            HTTP_X_FORWARDED_FOR="198.51.100.200",
        )
        assert right.status_code == 429 and right.json()["error"]["code"] == "throttled"
        assert not PersonalToken.objects.exists()

    def test_the_trusted_proxy_names_the_client_and_others_keep_their_own_budget(self, cast):
        client = APIClient()
        for i in range(10):
            assert self.attempt(client, peer="127.0.0.1", forwarded="198.51.100.7", username=f"user{i}") == 401
        assert self.attempt(client, peer="127.0.0.1", forwarded="198.51.100.7", username="other") == 429
        assert self.attempt(client, peer="127.0.0.1", forwarded="198.51.100.8", username="other") == 401
