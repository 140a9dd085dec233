"""A long backlog reaches a ``/ws/sessions/{id}/stream/`` socket at once, not one batch per re-check tick.

Real daphne, Redis and PostgreSQL, as in ``test_stream_websocket.py``. The server's re-check and heartbeat
intervals are set to their maximum, and the consumer starts its periodic timer only once the first catch-up
has finished; every tick ends with a heartbeat. So frames that all arrive before the first heartbeat were
sent by the catch-up itself, never by the timer.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from websockets.sync.client import ClientConnection, connect

from sessions_app import journal
from sessions_app.models import Session
from sessions_app.stream import EventKind, system_body
from sessions_app.tail import BATCH
from tests.tess_site.children import VENV_BIN, Child, child_env, free_port, serves_healthz
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

BACKLOG = 100_000


@pytest.fixture(scope="module")
def server(django_db_setup: None, start_child: Callable[..., Child]) -> Iterator[str]:
    port = free_port()
    child = start_child(
        "daphne",
        [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"],
        # The longest allowed: the first tick cannot come sooner than 30 s after the catch-up ends.
        child_env(TESS_STREAM_HEARTBEAT_SECONDS="30", TESS_STREAM_RECHECK_SECONDS="60"),
    )
    if not wait_for(lambda: not child.alive() or serves_healthz(port), timeout=30):
        pytest.fail(f"daphne did not answer on port {port}:\n{child.output()}")
    if not child.alive():
        pytest.fail(f"daphne exited:\n{child.output()}")
    yield f"127.0.0.1:{port}"


def _session(cast: Any) -> Session:
    return Session.objects.create(
        tenant=cast.acme, owner=cast.owner, title="t", provider_instance="alpha", runtime_id="$1"
    )


def _backlog(session: Session, n: int, chunk: int = 5_000) -> None:
    """``n`` events through the journal, ``chunk`` to a statement (far faster than one append each)."""
    for start in range(0, n, chunk):
        items = [(EventKind.SYSTEM, system_body(text=f"e{i}")) for i in range(start, min(n, start + chunk))]
        journal.events_append(session_id=session.pk, items=items)


def _open(server: str, session: Session, token: str, cursor: int = 0) -> ClientConnection:
    return connect(
        f"ws://{server}/ws/sessions/{session.pk}/stream/?cursor={cursor}",
        open_timeout=10,
        close_timeout=5,
        proxy=None,
        max_size=None,
        additional_headers={"Authorization": f"Bearer {token}"},
    )


def _seqs_before_any_heartbeat(ws: ClientConnection, n: int) -> list[int]:
    """The seqs of the next ``n`` frames; fails if a heartbeat (the timer's work) comes first."""
    seqs: list[int] = []
    while len(seqs) < n:
        frame = json.loads(ws.recv(timeout=60))
        assert frame["kind"] != "heartbeat", f"the re-check timer fired after {len(seqs)} of {n} frames"
        seqs.append(frame["seq"])
    return seqs


def test_a_client_from_cursor_zero_gets_a_long_backlog_in_order_without_waiting_for_the_timer(server, cast, token_for):
    session = _session(cast)
    _backlog(session, BACKLOG)
    with _open(server, session, token_for(cast.owner)) as ws:
        seqs = _seqs_before_any_heartbeat(ws, BACKLOG)
        assert seqs == list(range(1, BACKLOG + 1))
        # Nothing more, and nothing twice: what follows is live again.
        journal.events_append(session_id=session.pk, items=[(EventKind.SYSTEM, system_body(text="live"))])
        assert _seqs_before_any_heartbeat(ws, 1) == [BACKLOG + 1]


def test_subscribers_sharing_the_cache_each_read_on_past_it(server, cast, token_for):
    """Sockets of one server share the newest frames; each still reads every batch beyond them at once,
    whether it starts at zero, in the cached window or past its end."""
    total = 6 * BATCH + 7
    session = _session(cast)
    _backlog(session, total, chunk=BATCH)
    token = token_for(cast.owner)
    cursors = [0, 0, 3, 2 * BATCH + 1, 5 * BATCH]
    received: dict[int, list[int] | str] = {}

    def read(index: int, cursor: int) -> None:
        try:
            with _open(server, session, token, cursor=cursor) as ws:
                received[index] = _seqs_before_any_heartbeat(ws, total - cursor)
        except (AssertionError, OSError, TimeoutError) as exc:
            received[index] = repr(exc)

    threads = [threading.Thread(target=read, args=(i, c)) for i, c in enumerate(cursors)]
    with contextlib.ExitStack() as stack:
        for thread in threads:
            thread.start()
            stack.callback(thread.join)
    connection.close()
    for index, cursor in enumerate(cursors):
        assert received.get(index) == list(range(cursor + 1, total + 1)), f"cursor {cursor}"
