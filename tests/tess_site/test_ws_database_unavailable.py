"""A websocket that finds the database unavailable is closed with 1013 "try again later" (the socket's 503),
at the handshake or after it, through the real ASGI application: never a 500 at the handshake, never 1011.

The database failures are raised where a real one surfaces (the token lookup of the handshake, the
snapshot read after it), as ``tests/api/test_database_unavailable.py`` does for HTTP; the cluster suite
terminates real connections under load.
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import InterfaceError, OperationalError

from approvals_app import consumers as me_consumers
from tess_site import ws
from tess_site.asgi import application
from tess_site.ws import CLOSE_TRY_AGAIN_LATER
from tests.tess_site.test_metrics import (  # noqa: F401  (a fixture)
    connections_closed_after_use,
    me_socket_after_hello,
    scrape,
    value,
)

TOKEN = "tess_abcdefgh_" + "x" * 43


def _bearer(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


@pytest.mark.parametrize("error", [OperationalError, InterfaceError])
async def test_a_handshake_whose_token_lookup_finds_no_database_is_closed_try_again_later(monkeypatch, error):
    def unavailable(**kwargs):
        raise error("connection failed: sorry, too many clients already")

    monkeypatch.setattr(ws, "token_authenticate", unavailable)
    communicator = WebsocketCommunicator(application, "/ws/me/", headers=_bearer(TOKEN))
    connected, _ = await communicator.connect(timeout=10)
    assert connected  # accepted only so the close code can reach the client
    assert await communicator.receive_output(timeout=10) == {"type": "websocket.close", "code": CLOSE_TRY_AGAIN_LATER}
    await communicator.wait(timeout=10)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("connections_closed_after_use")
async def test_a_socket_whose_read_after_the_handshake_finds_no_database_is_closed_try_again_later(
    cast, token_for, monkeypatch
):
    def unavailable(**kwargs):
        raise OperationalError("the connection pool timed out")

    monkeypatch.setattr(me_consumers, "waiting_on", unavailable)
    communicator, before = await me_socket_after_hello(cast.owner, token_for)
    assert await communicator.receive_output(timeout=10) == {"type": "websocket.close", "code": CLOSE_TRY_AGAIN_LATER}
    await communicator.wait(timeout=10)
    after = await database_sync_to_async(scrape)()
    open_sockets = "tess_websocket_open"
    assert value(after, open_sockets, consumer="MeConsumer") == value(before, open_sockets, consumer="MeConsumer")


async def test_a_bug_is_not_taken_for_an_outage(monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("a bug, not an outage")

    monkeypatch.setattr(ws, "token_authenticate", broken)
    communicator = WebsocketCommunicator(application, "/ws/me/", headers=_bearer(TOKEN))
    with pytest.raises(RuntimeError, match="a bug"):
        await communicator.connect(timeout=10)
