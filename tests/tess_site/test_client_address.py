"""Which address is the client's: X-Forwarded-For counts only through the proxies in TESS_TRUSTED_PROXIES."""

from __future__ import annotations

import pytest

from tess_site.middleware import client_address

TRUSTED = ["127.0.0.1/32", "::1/128", "10.0.0.0/8"]


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        ("203.0.113.5", "198.51.100.1", "203.0.113.5"),  # not a proxy: its header is the client's own story
        ("127.0.0.1", "198.51.100.1", "198.51.100.1"),
        ("127.0.0.1", "1.2.3.4, 198.51.100.1", "198.51.100.1"),  # the client prepended a fake hop
        ("127.0.0.1", "198.51.100.1, 10.1.2.3", "198.51.100.1"),  # two proxies of ours in a row
        ("::ffff:127.0.0.1", "198.51.100.1", "198.51.100.1"),
        ("127.0.0.1", "", "127.0.0.1"),
        ("127.0.0.1", "not-an-address", "127.0.0.1"),
        ("127.0.0.1", "10.0.0.9", "10.0.0.9"),  # only proxies of ours: the first is as far as it goes
    ],
)
def test_the_client_is_the_first_untrusted_hop_from_the_right(peer, forwarded, client):
    assert client_address({"REMOTE_ADDR": peer, "HTTP_X_FORWARDED_FOR": forwarded}, TRUSTED) == client


def test_forwarded_headers_from_an_untrusted_peer_are_dropped(client, settings, db):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # A client claiming HTTPS itself is still sent to HTTPS; the proxy's claim is believed.
    direct = client.get("/admin/login/", REMOTE_ADDR="203.0.113.5", HTTP_X_FORWARDED_PROTO="https")
    relayed = client.get("/admin/login/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_PROTO="https")
    assert direct.status_code == 301
    assert relayed.status_code == 200
