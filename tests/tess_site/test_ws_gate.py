"""The websocket gate in process, without a server or a database: what it refuses before any lookup.

No test here may touch the database (none is marked ``django_db``, so a query would fail the test).
``test_websockets`` covers the whole path through a real server.
"""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator

from tess_site.asgi import application

TOKEN = "tess_abcdefgh_" + "x" * 43


@pytest.mark.parametrize("name", ["token", "access_token", "auth"])
async def test_it_refuses_a_token_in_the_url_before_looking_it_up(name):
    communicator = WebsocketCommunicator(application, f"/ws/me/?{name}={TOKEN}")
    connected, _ = await communicator.connect(timeout=5)
    assert not connected
    await communicator.disconnect()


async def test_it_refuses_a_foreign_origin_before_reading_the_session():
    communicator = WebsocketCommunicator(
        application, "/ws/me/", headers=[(b"origin", b"https://evil.example"), (b"cookie", b"sessionid=whatever")]
    )
    connected, _ = await communicator.connect(timeout=5)
    assert not connected
    await communicator.disconnect()


async def test_it_refuses_a_bearer_header_that_holds_no_token():
    communicator = WebsocketCommunicator(application, "/ws/me/", headers=[(b"authorization", b"Bearer not-a-token")])
    connected, _ = await communicator.connect(timeout=5)
    assert not connected
    await communicator.disconnect()
