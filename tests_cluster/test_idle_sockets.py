"""Idle websockets stay open under the production settings with real Redis.

channels-redis waits up to 5 s for a message on its Redis connection; a socket read timeout that is not
longer than that wait closed every idle socket with 1011 after about 5 s. The sockets here stay idle for
``TESS_IDLE_SECONDS`` (60 by default: more than ten of those waits; 600 for the ten-minute run), then must
still receive what happens next.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from sessions_app import services
from sessions_app.stream import EventKind, system_body
from tests.factories import SessionFactory
from tests.tess_site.children import Child
from tests.tess_site.conftest import start_child  # noqa: F401  (the module's child processes)
from tests.tess_site.production import HOST, start_production_web
from tests_cluster.cluster import bearer_socket

pytestmark = [pytest.mark.django_db(transaction=True)]

IDLE_SECONDS = float(os.environ.get("TESS_IDLE_SECONDS", "60"))


@pytest.fixture
def web(tmp_path, start_child: Callable[..., Child]) -> Iterator[int]:  # noqa: F811
    """The web tier as deployed: nginx in front of gunicorn and daphne under ``tess_site.settings.prod`` with the
    environment template; the sockets go through nginx to daphne."""
    unit = start_production_web(start_child, tmp_path / "web")
    yield unit.port
    assert "TimeoutError" not in unit.ws_child.wrote(), unit.ws_child.output()


def _post(port: int, path: str, token: str, body: dict) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {
        "Host": HOST,
        "X-Forwarded-Proto": "https",
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Idempotency-Key": uuid.uuid4().hex,
    }
    try:
        conn.request("POST", path, body=json.dumps(body), headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def _open(port: int, path: str, token: str) -> ClientConnection:
    return bearer_socket(f"ws://127.0.0.1:{port}{path}", token)


def _idle(sockets: dict[str, ClientConnection], seconds: float) -> None:
    """Read whatever arrives (heartbeats) until ``seconds`` have passed; fail on the first socket that closes."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        for name, ws in sockets.items():
            try:
                ws.recv(timeout=min(0.5, left))
            except TimeoutError:
                continue
            except ConnectionClosed as closed:
                pytest.fail(f"{name} closed after {seconds - left:.1f} s idle: {closed.rcvd}")


def _next_kind(ws: ClientConnection, kind: str, timeout: float = 15) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        frame = json.loads(ws.recv(timeout=deadline - time.monotonic()))
        if frame["kind"] == kind:
            return frame
    raise AssertionError(f"no {kind} frame within {timeout} s")


def test_idle_sockets_stay_open_and_still_deliver(web, cast, token_for):
    token = token_for(cast.owner)
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="idle")
    with _open(web, "/ws/me/", token) as me, _open(web, f"/ws/sessions/{session.pk}/stream/?cursor=0", token) as stream:
        assert _next_kind(me, "hello")
        _idle({"/ws/me/": me, "stream": stream}, IDLE_SECONDS)

        services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text="after the wait"))
        assert _next_kind(stream, "system")["body"]["text"] == "after the wait"
        status, card = _post(
            web, "/api/v1/memory/cards/", token, {"op": "remember", "category": "preferences", "value": "be brief"}
        )
        assert status == 201, card
        assert _next_kind(me, "card")["body"]["id"] == card["id"]
