"""``tess stream`` opens at the tail like a terminal does, follows live from there, and stops when the
session ends."""

from __future__ import annotations

import json

import pytest

from sessions_app import services
from sessions_app.stream import EventKind, status_body
from tests.factories import SessionFactory

from .test_stream import append, read_frames

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def end(session, status: str = "terminated") -> None:
    services.event_append(
        session_id=session.pk, kind=EventKind.STATUS, body=status_body(status=status, agent_state="ended", since=None)
    )


def test_it_opens_at_the_tail_then_follows_live_and_exits_when_the_session_ends(cast, tess):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="demo")
    append(session, *(f"line {i}" for i in range(1, 41)))
    tess.login("owner")
    process = tess.popen("stream", str(session.pk), "--tail", "3", "--json")
    try:
        assert [f["body"]["text"] for f in read_frames(process, 3)] == ["line 38", "line 39", "line 40"]
        append(session, "line 41")
        assert [f["seq"] for f in read_frames(process, 1)] == [41]
        end(session)
        (last,) = read_frames(process, 1)
        assert last["kind"] == "status" and last["body"]["status"] == "terminated"
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0
    assert "Session demo has ended (terminated)." in err


def test_the_default_tail_is_a_screenful(cast, tess):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="demo", status="exited")
    append(session, *(f"line {i}" for i in range(1, 41)))
    end(session, "exited")
    tess.login("owner")
    done = tess("stream", str(session.pk), LINES="12", COLUMNS="100")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 11  # a 12-line terminal: 10 events and the line saying it ended
    assert lines[0].split() == ["32", "system", "line", "32"]
    assert lines[-2].split() == ["41", "status", '{"status":', '"exited"}']
    assert lines[-1] == "Session demo has ended (exited)."


def test_from_start_shows_everything_of_an_ended_session_and_stops(cast, tess):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="done", status="terminated")
    append(session, *(f"line {i}" for i in range(1, 31)))
    tess.login("owner")
    done = tess("stream", str(session.pk), "--from-start", "--json", LINES="12")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["seq"] for line in done.stdout.splitlines()] == list(range(1, 31))
    assert "Session done has ended (terminated)." in done.stderr


def test_continuation_lines_stay_in_the_text_column(cast, tess):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme, status="exited")
    append(session, "first line\nsecond line\nthird line")
    tess.login("owner")
    lines = tess("stream", str(session.pk)).stdout.splitlines()
    assert lines[0].split() == ["1", "system", "first", "line"]
    column = lines[0].index("first")
    assert lines[1] == " " * column + "second line"
    assert lines[2] == " " * column + "third line"


def test_a_tail_of_someone_elses_session_is_refused_before_anything_is_shown(cast, tess):
    session = SessionFactory.create(owner=cast.teammate, tenant=cast.acme)
    append(session, "secret")
    tess.login("owner")
    for args in (["--tail", "5"], ["--from-start"], []):
        done = tess("stream", str(session.pk), *args)
        assert done.returncode == 4, args
        assert "secret" not in done.stdout + done.stderr


def test_a_bad_tail_is_a_usage_error(cast, tess):
    tess.login("owner")
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    done = tess("stream", str(session.pk), "--tail", "0")
    assert done.returncode == 2 and "--tail" in done.stderr
