"""The websocket Origin rule for cookie-authenticated sockets: scheme, host and port must all match."""

from __future__ import annotations

import pytest

from tess_site.ws import origin_allowed


def ws_scope(origin: str | None, host: str = "tess.example.com", scheme: str = "wss") -> dict:
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return {"type": "websocket", "scheme": scheme, "headers": headers}


@pytest.fixture(autouse=True)
def _served_at(settings):
    settings.ALLOWED_HOSTS = ["tess.example.com", "localhost"]
    settings.TESS_PUBLIC_URL = "https://tess.example.com"
    settings.CSRF_TRUSTED_ORIGINS = ["https://admin.example.com:8443"]


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("https://tess.example.com", "tess.example.com", "wss"),  # its own origin
        ("https://tess.example.com:443", "proxy.internal", "ws"),  # TESS_PUBLIC_URL, default port spelt out
        ("https://ADMIN.example.com:8443", "tess.example.com", "wss"),  # a trusted origin, any case
        ("http://localhost:8001", "localhost:8001", "ws"),  # `make run` on another port
    ],
)
def test_it_accepts_the_sockets_own_and_the_configured_origins(origin, host, scheme):
    assert origin_allowed(ws_scope(origin, host, scheme))


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        (None, "tess.example.com", "wss"),
        ("null", "tess.example.com", "wss"),
        ("https://evil.example", "tess.example.com", "wss"),
        ("http://tess.example.com", "tess.example.com", "wss"),  # scheme differs
        ("https://tess.example.com:1", "tess.example.com", "wss"),  # port differs
        ("http://localhost:1", "localhost:8001", "ws"),  # port differs on the developer's machine
        ("http://evil.example", "evil.example", "ws"),  # same as its Host, but not an allowed host
        ("https://admin.example.com", "tess.example.com", "wss"),  # trusted origin's port differs
        ("ftp://tess.example.com", "tess.example.com", "wss"),
    ],
)
def test_it_refuses_any_other_origin(origin, host, scheme):
    assert not origin_allowed(ws_scope(origin, host, scheme))
