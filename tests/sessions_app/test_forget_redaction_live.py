"""A forgotten note's words leave the live stream: sockets already open are told to re-render the seqs, and
sockets opened afterwards (through the same process's shared tail) read the redacted text."""

from __future__ import annotations

import pytest

from approvals_app.cards import card_confirm
from memory_app.services import memory_forget, memory_propose
from sessions_app import journal, stream
from sessions_app.redaction import REDACTED_TEXT
from sessions_app.stream import EventKind
from tests.conftest import scope_of
from tests.sessions_app.test_stream_websocket import _bearer, _frames, _open, _session, server  # noqa: F401

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

WORDS = "I lead with sev0"


def test_forget_all_redacts_the_turn_in_on_open_sockets_and_for_later_readers(server, cast, token_for):  # noqa: F811
    session = _session(cast.owner, cast.acme)
    scope = scope_of(cast.owner, cast.acme)
    journal.events_append(
        session_id=session.pk,
        items=[
            (EventKind.TURN_IN, stream.turn_in_body(turn_id="t1", channel="web", text=f"remember that {WORDS}")),
            (EventKind.TURN_OUT, stream.turn_out_body(turn_id="t1", text="I parked a card.", recalled_count=0)),
            (EventKind.TURN_IN, stream.turn_in_body(turn_id="t2", channel="web", text="hello")),
        ],
    )
    card = memory_propose(scope, data={"op": "remember", "category": "preferences", "value": WORDS})
    card_confirm(scope=scope, card_id=card.id)
    credentials = _bearer(token_for(cast.owner))

    with _open(server, session, **credentials) as ws:
        before = _frames(ws, 3)
        assert before[0]["body"]["text"] == f"remember that {WORDS}"

        outcome = memory_forget(scope, category=None, slot=None, forget_all=True)
        assert (outcome.deleted_count, outcome.redacted_count) == (1, 1)

        [notice] = _frames(ws, 1)
        assert notice["kind"] == "redacted" and notice["seq"] == 4
        assert notice["body"] == {"seqs": [1], "text": REDACTED_TEXT}

        # Read while the first socket still holds the tail in the server's memory.
        with _open(server, session, **credentials) as later:
            frames = _frames(later, 4)
    assert [(f["seq"], f["kind"]) for f in frames] == [(1, "turn.in"), (2, "turn.out"), (3, "turn.in"), (4, "redacted")]
    assert frames[0]["body"] == {"turn_id": "t1", "channel": "web", "text": REDACTED_TEXT}
    assert frames[0]["ts"] == before[0]["ts"]
    assert frames[2]["body"]["text"] == "hello"
