"""The admin sign-in page refuses further attempts once too many failed."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def attempt(client: Client, username: str, password: str, address: str = "10.0.0.1") -> int:
    response = client.post(
        "/admin/login/?next=/admin/", {"username": username, "password": password}, REMOTE_ADDR=address
    )
    return response.status_code


def test_failed_sign_ins_are_limited_per_username(cast, settings):
    settings.TESS_LOGIN_RATE = "3/min"
    client = Client()
    assert [attempt(client, "owner", "wrong", f"10.0.0.{i}") for i in range(3)] == [200, 200, 200]
    # Even the right password from a new address waits: the account is being guessed at.
    assert attempt(client, "owner", "owner-pass-1234", "10.0.0.9") == 429


def test_failed_sign_ins_are_limited_per_address(cast, settings):
    settings.TESS_LOGIN_RATE = "3/min"
    client = Client()
    for name in ("a", "b", "c"):
        assert attempt(client, name, "wrong") == 200
    response = client.post(
        "/admin/login/", {"username": "owner", "password": "owner-pass-1234"}, REMOTE_ADDR="10.0.0.1"
    )
    assert response.status_code == 429 and response["Retry-After"] == "60"


def test_a_correct_sign_in_is_not_counted_and_works(cast, settings):
    settings.TESS_LOGIN_RATE = "2/min"
    client = Client()
    for _ in range(3):
        assert attempt(Client(), "owner", "owner-pass-1234") == 302
    assert attempt(client, "owner", "owner-pass-1234") == 302
