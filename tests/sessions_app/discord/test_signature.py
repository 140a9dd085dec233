"""The interactions endpoint believes only requests signed with the application's key, fresh and once."""

from __future__ import annotations

import json
import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.test import Client

from .conftest import INTERACTIONS, signed

pytestmark = pytest.mark.django_db

PING = json.dumps({"id": "1", "type": 1, "application_id": "app-1", "token": "t"}).encode()


def post(body: bytes, headers: dict[str, str]):
    return Client().post(INTERACTIONS, body, content_type="application/json", headers=headers)


def test_it_answers_a_signed_ping_with_pong(discord_key):
    response = post(PING, signed(discord_key, PING))
    assert response.status_code == 200
    assert response.json() == {"type": 1}


def test_it_refuses_a_signature_by_another_key(discord_key):
    response = post(PING, signed(Ed25519PrivateKey.generate(), PING))
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_signature"


def test_it_refuses_a_body_changed_after_signing(discord_key):
    headers = signed(discord_key, PING)
    response = post(PING.replace(b'"t"', b'"u"'), headers)
    assert response.status_code == 401


def test_it_refuses_missing_or_malformed_signature_headers(discord_key):
    assert post(PING, {}).status_code == 401
    assert post(PING, {"X-Signature-Ed25519": "zz", "X-Signature-Timestamp": "x"}).status_code == 401


def test_it_refuses_a_stale_timestamp(discord_key):
    response = post(PING, signed(discord_key, PING, timestamp=int(time.time()) - 3600))
    assert response.status_code == 401
    assert "stale" in response.json()["error"]["message"]


def test_it_refuses_a_replayed_request(discord_key):
    headers = signed(discord_key, PING)
    assert post(PING, headers).status_code == 200
    replay = post(PING, headers)
    assert replay.status_code == 401
    assert "replayed" in replay.json()["error"]["message"]


@pytest.mark.parametrize(
    "respell",
    [str.upper, lambda hex_: " ".join(hex_[i : i + 2] for i in range(0, len(hex_), 2))],
    ids=["upper-case", "space-separated"],
)
def test_it_refuses_a_replay_with_the_signature_spelt_differently(discord_key, respell):
    headers = signed(discord_key, PING)
    assert post(PING, headers).status_code == 200
    replay = post(PING, {**headers, "X-Signature-Ed25519": respell(headers["X-Signature-Ed25519"])})
    assert replay.status_code == 401
    assert replay.json()["error"]["code"] == "invalid_signature"


def test_it_refuses_a_non_canonical_signature_even_the_first_time(discord_key):
    headers = signed(discord_key, PING)
    response = post(PING, {**headers, "X-Signature-Ed25519": headers["X-Signature-Ed25519"].upper()})
    assert response.status_code == 401


def test_it_refuses_everything_when_no_public_key_is_configured(discord_key, settings):
    settings.TESS_DISCORD_PUBLIC_KEY = ""
    assert post(PING, signed(discord_key, PING)).status_code == 401
