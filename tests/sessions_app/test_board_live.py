"""A real tmux agent that starts and stops waiting, seen over real daphne and Redis: its owner's ``/ws/me/`` gains
and loses the inbox item, the board sockets of those who may see it get its row, and nobody else hears of it.

The pump runs in this process (as the worker would) and commits; daphne, a child process, serves the sockets.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from guardian.shortcuts import assign_perm
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.conftest import Cast, scope_of
from tests.tess_site.children import VENV_BIN, Child, child_env, free_port, serves_healthz
from tests.waiting import wait_for

from .agent_state_helpers import configure, pump_until_state, run_script
from .conftest import TmuxInstance
from .test_agent_state_tmux import PROMPT_SCRIPT

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def server(django_db_setup: None, start_child: Callable[..., Child]) -> Iterator[str]:
    port = free_port()
    child = start_child(
        "daphne",
        [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"],
        child_env(TESS_STREAM_RECHECK_SECONDS="30"),
    )
    if not wait_for(lambda: not child.alive() or serves_healthz(port), timeout=30):
        pytest.fail(f"daphne did not answer on port {port}:\n{child.output()}")
    if not child.alive():
        pytest.fail(f"daphne exited:\n{child.output()}")
    yield f"127.0.0.1:{port}"


def _open(server: str, path: str, token: str) -> ClientConnection:
    ws = connect(
        f"ws://{server}{path}",
        open_timeout=10,
        close_timeout=5,
        proxy=None,
        additional_headers={"Authorization": f"Bearer {token}"},
    )
    first = json.loads(ws.recv(timeout=20))
    assert first["kind"] == "hello"
    if path == "/ws/me/":
        assert json.loads(ws.recv(timeout=20))["kind"] == "snapshot"
    return ws


def _next(ws: ClientConnection, want: Callable[[dict[str, Any]], bool], timeout: float = 30) -> dict[str, Any]:
    """The first frame that ``want``s, skipping others (earlier rows, heartbeats)."""
    found: list[dict[str, Any]] = []

    def step() -> bool:
        try:
            frame = json.loads(ws.recv(timeout=1))
        except TimeoutError:
            return False
        if want(frame):
            found.append(frame)
            return True
        return False

    wait_for(step, "the expected frame", timeout=timeout, interval=0)
    return found[0]


def _everything_pending(ws: ClientConnection) -> list[dict[str, Any]]:
    """What the socket holds now (its peers' frames have arrived: those were sent in the same instant)."""
    frames = []
    try:
        while True:
            frames.append(json.loads(ws.recv(timeout=1)))
    except (TimeoutError, ConnectionClosed):
        return frames


def test_a_waiting_agent_enters_and_leaves_its_owners_inbox_and_board_and_nobody_elses(
    server: str, cast: Cast, tmux: TmuxInstance, settings: Any, tmp_path: Path, token_for: Callable[..., str]
) -> None:
    provider = configure(settings, tmux)
    session = run_script(cast, provider, tmp_path, PROMPT_SCRIPT)
    pump_until_state(session, "working")
    assign_perm("view_session", cast.approver, session)  # a viewer by grant: the board, not the inbox
    key = f"session_waiting:{session.pk}"
    sid = str(session.pk)

    owner_me = _open(server, "/ws/me/", token_for(cast.owner))
    owner_board = _open(server, "/ws/board/", token_for(cast.owner))
    viewer_me = _open(server, "/ws/me/", token_for(cast.approver))
    viewer_board = _open(server, "/ws/board/", token_for(cast.approver))
    teammate_me = _open(server, "/ws/me/", token_for(cast.teammate))
    teammate_board = _open(server, "/ws/board/", token_for(cast.teammate))
    outsider_board = _open(server, "/ws/board/", token_for(cast.outsider, cast.globex))

    (tmp_path / "ask").touch()
    pump_until_state(session, "waiting_for_input")
    entered = _next(owner_me, lambda f: f["kind"] == "inbox.item" and f["body"]["key"] == key)
    assert entered["body"]["session_id"] == sid
    row = _next(owner_board, lambda f: f["kind"] == "row" and f["body"]["id"] == sid)
    assert row["body"]["agent_state"] == "waiting_for_input" and row["body"]["owner"] == "owner"
    seen = _next(viewer_board, lambda f: f["kind"] == "row" and f["body"]["id"] == sid)
    assert seen["body"]["agent_state"] == "waiting_for_input"

    provider.send_message(session.runtime_ref, "y", "answer-1", scope_of(cast.owner, cast.acme))
    pump_until_state(session, "working")
    _next(owner_me, lambda f: f["kind"] == "inbox.left" and f["body"]["key"] == key)
    row = _next(owner_board, lambda f: f["kind"] == "row" and f["body"]["id"] == sid)
    assert row["body"]["agent_state"] == "working"

    assert not [f for f in _everything_pending(viewer_me) if key in json.dumps(f)]
    for ws in (teammate_me, teammate_board, outsider_board):
        assert not [f for f in _everything_pending(ws) if sid in json.dumps(f)]
    for ws in (owner_me, owner_board, viewer_me, viewer_board, teammate_me, teammate_board, outsider_board):
        ws.close()


def test_the_board_socket_refuses_an_anonymous_caller(server: str) -> None:
    with pytest.raises(Exception):  # noqa: B017 (the handshake is refused: websockets raises InvalidStatus)
        connect(f"ws://{server}/ws/board/", open_timeout=10, proxy=None)


def test_a_deactivated_viewer_gets_no_more_rows_and_the_socket_closes(
    server: str, cast: Cast, token_for: Callable[..., str]
) -> None:
    from django.db import transaction

    from sessions_app import events
    from tess_site.consumers import CLOSE_CREDENTIAL_ENDED
    from tests.factories import SessionFactory

    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="watched")
    ws = _open(server, "/ws/board/", token_for(cast.owner))
    with transaction.atomic():
        events.board_changed_on_commit(tenant_id=cast.acme.pk, session_id=session.pk)
    assert _next(ws, lambda f: f["kind"] == "row")["body"]["title"] == "watched"

    type(cast.owner).objects.filter(pk=cast.owner.pk).update(is_active=False)
    with transaction.atomic():
        events.board_changed_on_commit(tenant_id=cast.acme.pk, session_id=session.pk)
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            frame = json.loads(ws.recv(timeout=20))
            assert frame["kind"] != "row", "a row reached a deactivated user"
    assert closed.value.rcvd is not None and closed.value.rcvd.code == CLOSE_CREDENTIAL_ENDED
