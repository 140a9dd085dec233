"""``tess stream`` over a real websocket: live events, resuming from its cursor after the server restarts,
and a clean exit on Ctrl-C (130, as documented)."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from sessions_app import services
from sessions_app.stream import EventKind, system_body
from tests.factories import SessionFactory

from .conftest import start_daphne

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def append(session, *texts: str) -> None:
    for text in texts:
        services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text=text))


def read_frames(process: subprocess.Popen[str], n: int) -> list[dict]:
    assert process.stdout is not None
    frames: list[dict] = []
    while len(frames) < n:
        line = process.stdout.readline()
        assert line, f"stream ended early; stderr: {process.stderr.read() if process.stderr else ''}"
        frames.append(json.loads(line))
    return frames


def test_stream_prints_live_events_as_a_table_line(cast, tess):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    append(session, "one")
    tess.login("owner")
    done = tess("stream", str(session.pk), "--max-events", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "system", "one"]


def test_stream_resumes_from_its_cursor_after_the_server_restarts(cast, tess, live, start_child):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    append(session, "a1", "a2", "a3")
    tess.login("owner")
    process = tess.popen("stream", str(session.pk), "--json", "--max-events", "6")
    try:
        assert [f["seq"] for f in read_frames(process, 3)] == [1, 2, 3]
        live.child.stop()  # the server goes away under the open socket
        append(session, "b1", "b2", "b3")  # written while no server is up
        live.child = start_daphne(start_child, live.port)
        rest = read_frames(process, 3)
        assert [(f["seq"], f["body"]["text"]) for f in rest] == [(4, "b1"), (5, "b2"), (6, "b3")]
        assert process.wait(timeout=30) == 0
        assert process.stderr is not None
        assert "reconnecting from seq 3" in process.stderr.read()
    finally:
        process.kill()


def test_ctrl_c_ends_the_stream_cleanly(cast, tess):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    append(session, "x")
    tess.login("owner")
    process = tess.popen("stream", str(session.pk), "--json")
    try:
        read_frames(process, 1)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130
    assert "Traceback" not in err


def test_stream_of_another_owners_session_is_refused(cast, tess):
    session = SessionFactory.create(owner=cast.teammate, tenant=cast.acme)
    tess.login("owner")
    done = tess("stream", str(session.pk))
    assert done.returncode == 4
    assert "Traceback" not in done.stderr
