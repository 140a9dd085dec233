"""What ``tess`` prints for people never obeys terminal control sequences that came from the server: a title
or a runtime's output could otherwise write the clipboard (OSC 52) or clear the screen. ``--json`` keeps the
text as it is (escaped by JSON), and ``tess stream --raw`` writes runtime output untouched."""

from __future__ import annotations

import json

import pytest

from sessions_app import services
from sessions_app.stream import EventKind, output_body, system_body
from tess_cli.output import neutralise
from tests.factories import SessionFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
CLEAR = "\x1b[2J"


def test_neutralise_shows_control_characters_in_caret_notation():
    assert neutralise(f"a{CLIPBOARD}b") == "a^[]52;c;cm0gLXJmIH4=^Gb"
    assert neutralise("one\r\ntwo\rthree\tfour\x7f\x9b") == "one\ntwo^Mthree\tfour^?\\x9b"


def test_a_title_with_escape_sequences_is_printed_inert(cast, tess):
    SessionFactory.create(owner=cast.owner, tenant=cast.acme, title=f"evil{CLIPBOARD}{CLEAR}")
    tess.login("owner")
    listed = tess("sessions", "list")
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    assert "evil^[]52;c;" in listed.stdout


def test_json_keeps_the_text_as_the_server_sent_it(cast, tess):
    SessionFactory.create(owner=cast.owner, tenant=cast.acme, title=f"evil{CLEAR}")
    tess.login("owner")
    listed = tess("sessions", "list", "--json")
    assert "\x1b" not in listed.stdout  # escaped by JSON, not written raw
    assert json.loads(listed.stdout)[0]["title"] == f"evil{CLEAR}"


def test_stream_output_is_inert_unless_raw_is_asked_for(cast, tess):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    services.event_append(
        session_id=session.pk,
        kind=EventKind.OUTPUT,
        body=output_body(data=f"{CLEAR}hello\n", source="pane", cursor="0", next_cursor="1"),
    )
    services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text=f"x{CLIPBOARD}"))
    tess.login("owner")
    shown = tess("stream", str(session.pk), "--max-events", "2")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "^[[2Jhello" in shown.stdout and "x^[]52;" in shown.stdout
    raw = tess("stream", str(session.pk), "--max-events", "2", "--raw")
    assert raw.returncode == 0, raw.stderr
    assert f"{CLEAR}hello\n" in raw.stdout  # the runtime's bytes, as it wrote them
    assert CLIPBOARD not in raw.stdout  # --raw covers runtime output only, not other events
