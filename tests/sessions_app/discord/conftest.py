"""Discord tests: an Ed25519 key pair made per test, signed requests, and the API stand-in."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.test import Client

from tess_site.accounts.models import ExternalIdentity

from .standin import DiscordStandIn, running_discord_standin

INTERACTIONS = "/integrations/discord/interactions/"
CHANNEL = "900000000000000001"


@pytest.fixture
def discord_key(settings: Any) -> Ed25519PrivateKey:
    key = Ed25519PrivateKey.generate()
    settings.TESS_DISCORD_PUBLIC_KEY = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
    settings.TESS_DISCORD_APPLICATION_ID = "app-1"
    return key


@pytest.fixture
def discord_api(settings: Any) -> Iterator[DiscordStandIn]:
    with running_discord_standin() as standin:
        settings.TESS_DISCORD_API_BASE = standin.base
        yield standin


def signed(key: Ed25519PrivateKey, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    return {"X-Signature-Ed25519": key.sign(ts.encode() + body).hex(), "X-Signature-Timestamp": ts}


def command(sub: str, user_id: str, channel_id: str = CHANNEL, **options: Any) -> dict[str, Any]:
    return {
        "id": uuid.uuid4().hex,
        "application_id": "app-1",
        "type": 2,
        "token": "tok-" + uuid.uuid4().hex * 3,
        "channel_id": channel_id,
        "member": {"user": {"id": user_id, "username": f"u{user_id}"}},
        "data": {
            "name": "tess",
            "options": [
                {"name": sub, "type": 1, "options": [{"name": k, "type": 3, "value": v} for k, v in options.items()]}
            ],
        },
    }


@pytest.fixture
def interact(discord_key: Ed25519PrivateKey) -> Callable[..., Any]:
    """POST a signed interaction; returns the response."""

    def post(payload: dict[str, Any], timestamp: int | None = None) -> Any:
        body = json.dumps(payload).encode()
        headers = signed(discord_key, body, timestamp)
        return Client().post(INTERACTIONS, body, content_type="application/json", headers=headers)

    return post


def link(user: Any, tenant: Any, discord_user_id: str) -> ExternalIdentity:
    return ExternalIdentity.objects.create(tenant=tenant, user=user, provider="discord", external_id=discord_user_id)
