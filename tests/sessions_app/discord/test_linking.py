"""Linking: one-time, hashed, expiring, rate-limited codes made over the API and redeemed with /tess link."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from sessions_app.discord.models import DiscordLinkCode
from tess_site.accounts.models import ExternalIdentity

from .conftest import command

pytestmark = pytest.mark.django_db

CODES = "/api/v1/identities/discord/link-codes/"


def test_a_code_links_the_discord_user_to_its_maker_once(cast, api_as, interact):
    response = api_as(cast.owner).post(CODES)
    assert response.status_code == 201
    code = response.json()["code"]
    assert not DiscordLinkCode.objects.filter(digest__contains=code.replace("-", "")).exists()  # stored hashed
    answer = interact(command("link", "111", code=code)).json()
    assert answer["type"] == 4 and answer["data"]["flags"] == 64
    assert answer["data"]["content"].startswith("Linked")
    linked = ExternalIdentity.objects.get(provider="discord", external_id="111")
    assert (linked.user, linked.tenant) == (cast.owner, cast.acme)
    again = interact(command("link", "222", code=code)).json()
    assert again["data"]["content"].startswith("Refused")
    assert not ExternalIdentity.objects.filter(external_id="222").exists()


def test_an_expired_code_links_nobody(cast, api_as, interact):
    code = api_as(cast.owner).post(CODES).json()["code"]
    DiscordLinkCode.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert interact(command("link", "111", code=code)).json()["data"]["content"].startswith("Refused")
    assert not ExternalIdentity.objects.exists()


def test_a_new_code_retires_the_previous_one(cast, api_as, interact):
    client = api_as(cast.owner)
    first = client.post(CODES).json()["code"]
    client.post(CODES)
    assert interact(command("link", "111", code=first)).json()["data"]["content"].startswith("Refused")


def test_redeeming_is_rate_limited_per_discord_user(cast, interact):
    answers = [interact(command("link", "333", code="WRONG-CODE0")).json() for _ in range(11)]
    assert "unknown" in answers[0]["data"]["content"]
    assert "Too many" in answers[-1]["data"]["content"]


def test_making_codes_is_rate_limited(cast, api_as, settings):
    client = api_as(cast.owner)
    statuses = [client.post(CODES).status_code for _ in range(11)]
    assert statuses[:10] == [201] * 10
    assert statuses[10] == 429


def test_anonymous_callers_cannot_make_codes(cast):
    assert Client().post(CODES).status_code in (401, 403)


def test_a_browser_session_makes_codes_with_csrf(cast, browser_as):
    from tests.conftest import csrf_token

    client = browser_as(cast.owner)
    assert client.post(CODES).status_code == 403  # no CSRF token
    assert client.post(CODES, headers={"X-CSRFToken": csrf_token(client)}).status_code == 201
