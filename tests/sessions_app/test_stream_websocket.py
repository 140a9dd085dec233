"""``/ws/sessions/{id}/stream/`` through the real ASGI application, served by daphne in a child process.

The server shares the test database and Redis (channels-redis), so every test commits (``transaction=True``)
and events are appended by this process, as the pump or a worker would.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from sessions_app import services
from sessions_app.consumers import CLOSE_CREDENTIAL_ENDED, CLOSE_NOT_FOUND
from sessions_app.models import Session
from sessions_app.stream import EventKind, system_body
from tests.conftest import scope_of
from tests.tess_site.children import VENV_BIN, Child, child_env, free_port, serves_healthz
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

TOTAL = 1000


@pytest.fixture(scope="module")
def server(django_db_setup: None, start_child: Callable[..., Child]) -> Iterator[str]:
    port = free_port()
    child = start_child(
        "daphne",
        [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"],
        child_env(TESS_STREAM_HEARTBEAT_SECONDS="2", TESS_STREAM_RECHECK_SECONDS="1"),
    )
    if not wait_for(lambda: not child.alive() or serves_healthz(port), timeout=30):
        pytest.fail(f"daphne did not answer on port {port}:\n{child.output()}")
    if not child.alive():
        pytest.fail(f"daphne exited:\n{child.output()}")
    yield f"127.0.0.1:{port}"


def _session(owner: Any, tenant: Any) -> Session:
    return Session.objects.create(tenant=tenant, owner=owner, title="t", provider_instance="alpha", runtime_id="$1")


def _append(session: Session, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text=f"e{i}"))


def _bearer(token: str) -> dict[str, Any]:
    return {"additional_headers": {"Authorization": f"Bearer {token}"}}


def _open(server: str, session: Session | str, cursor: int = 0, **kwargs: Any) -> ClientConnection:
    session_id = session.pk if isinstance(session, Session) else session
    return connect(
        f"ws://{server}/ws/sessions/{session_id}/stream/?cursor={cursor}",
        open_timeout=10,
        close_timeout=5,
        proxy=None,
        **kwargs,
    )


def _frames(ws: ClientConnection, n: int) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    while len(frames) < n:
        frame = json.loads(ws.recv(timeout=20))
        if frame["kind"] != "heartbeat":
            frames.append(frame)
    return frames


def _close_code(ws: ClientConnection, timeout: float = 20) -> int | None:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            ws.recv(timeout=timeout)
    return closed.value.rcvd.code if closed.value.rcvd else None


def test_it_sends_every_event_after_the_cursor_then_live_ones(server, cast, token_for):
    session = _session(cast.owner, cast.acme)
    _append(session, 5)
    with _open(server, session, cursor=2, **_bearer(token_for(cast.owner))) as ws:
        first = _frames(ws, 3)
        assert [f["seq"] for f in first] == [3, 4, 5]
        assert set(first[0]) == {"seq", "kind", "ts", "body"}
        assert first[0]["kind"] == "system" and first[0]["body"] == {"text": "e2", "code": ""}
        _append(session, 2, start=5)
        assert [f["seq"] for f in _frames(ws, 2)] == [6, 7]


def test_a_client_resumes_across_forced_disconnects_seeing_every_seq_exactly_once(server, cast, token_for):
    session = _session(cast.owner, cast.acme)
    credentials = _bearer(token_for(cast.owner))
    produced = threading.Event()

    def produce() -> None:
        try:
            for start in range(0, TOTAL, 50):
                _append(session, 50, start=start)
        finally:
            connection.close()
            produced.set()

    producer = threading.Thread(target=produce)
    producer.start()
    received: list[int] = []
    disconnects = 0
    try:
        while len(received) < TOTAL:
            cursor = received[-1] if received else 0
            with _open(server, session, cursor=cursor, **credentials) as ws:
                # Forced disconnect after a few hundred frames, wherever the producer is.
                for frame in _frames(ws, min(300, TOTAL - len(received))):
                    received.append(frame["seq"])
            disconnects += 1
    finally:
        producer.join()
    assert produced.is_set()
    assert disconnects >= 3
    assert received == list(range(1, TOTAL + 1))


def test_a_heartbeat_arrives_on_a_quiet_stream(server, cast, token_for):
    session = _session(cast.owner, cast.acme)
    with _open(server, session, **_bearer(token_for(cast.owner))) as ws:
        frame = json.loads(ws.recv(timeout=20))
    assert frame["kind"] == "heartbeat" and frame["seq"] is None
    assert frame["body"] == {"last_seq": 0}


@pytest.mark.parametrize("who", ["teammate", "outsider"])
def test_other_people_are_refused(server, cast, token_for, who):
    session = _session(cast.owner, cast.acme)
    _append(session, 1)
    user = getattr(cast, who)
    token = token_for(user, cast.globex if who == "outsider" else cast.acme)
    with _open(server, session, **_bearer(token)) as ws:
        assert _close_code(ws) == CLOSE_NOT_FOUND


def test_an_unknown_session_is_refused_like_a_foreign_one(server, cast, token_for):
    with _open(server, "00000000-0000-0000-0000-000000000000", **_bearer(token_for(cast.owner))) as ws:
        assert _close_code(ws) == CLOSE_NOT_FOUND


def test_losing_a_grant_closes_the_stream(server, cast, token_for):
    session = _session(cast.owner, cast.acme)
    owner = scope_of(cast.owner, cast.acme)
    services.session_grant(scope=owner, session_id=session.pk, grantee=cast.teammate)
    _append(session, 1)
    with _open(server, session, **_bearer(token_for(cast.teammate))) as ws:
        assert [f["seq"] for f in _frames(ws, 1)] == [1]
        services.session_revoke(scope=owner, session_id=session.pk, grantee=cast.teammate)
        assert _close_code(ws) == CLOSE_NOT_FOUND


def test_deactivating_the_user_closes_the_stream(server, cast, token_for):
    session = _session(cast.owner, cast.acme)
    with _open(server, session, **_bearer(token_for(cast.owner))) as ws:
        type(cast.owner).objects.filter(pk=cast.owner.pk).update(is_active=False)
        assert _close_code(ws) == CLOSE_CREDENTIAL_ENDED


def test_logging_out_closes_a_browser_stream(server, cast):
    session = _session(cast.owner, cast.acme)
    browser = Client()
    browser.force_login(cast.owner)
    cookie = browser.cookies[settings.SESSION_COOKIE_NAME].value
    headers = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"}
    with _open(server, session, origin=f"http://{server}", additional_headers=headers) as ws:
        _append(session, 1)
        assert [f["seq"] for f in _frames(ws, 1)] == [1]
        browser.logout()
        assert _close_code(ws) == CLOSE_CREDENTIAL_ENDED


@pytest.mark.parametrize(
    "origin",
    ["https://evil.example", "http://localhost:1", "http://127.0.0.1:1", "https://{server}", "null"],
)
def test_a_browser_from_a_foreign_origin_is_refused(server, cast, origin):
    from websockets.exceptions import InvalidStatus

    session = _session(cast.owner, cast.acme)
    browser = Client()
    browser.force_login(cast.owner)
    cookie = browser.cookies[settings.SESSION_COOKIE_NAME].value
    with pytest.raises(InvalidStatus):
        _open(
            server,
            session,
            origin=origin.format(server=server),
            additional_headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"},
        ).close()


def test_subscribers_sharing_a_server_each_get_exactly_the_events_after_their_own_cursor(server, cast, token_for):
    session = _session(cast.owner, cast.acme)
    _append(session, 100)
    credentials = _bearer(token_for(cast.owner))
    cursors = [0, 10, 60, 99, 100]
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(_open(server, session, cursor=c, **credentials)) for c in cursors]
        producer = threading.Thread(target=lambda: (_append(session, 300, start=100), connection.close()))
        producer.start()
        received = [[f["seq"] for f in _frames(ws, 400 - cursor)] for ws, cursor in zip(sockets, cursors, strict=True)]
        producer.join()
    for cursor, seqs in zip(cursors, received, strict=True):
        assert seqs == list(range(cursor + 1, 401))
