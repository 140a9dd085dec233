"""Forgetting a note takes its words out of the session stream and the conversation summaries too (seed 002:
forget, forget-all and erasure "delete … current bytes and matching lineage")."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.core.management import call_command

from memory_app.services import memory_forget
from sessions_app import redaction
from sessions_app.models import ConversationSummary, Session, SessionEvent
from sessions_app.redaction import REDACTED_TEXT, register_conversation_reset
from tess_site.audit.models import AuditEvent
from tests.conftest import scope_of
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(cast) -> Session:
    return SessionFactory.create(owner=cast.owner, tenant=cast.acme)


def turn(client, session: Session, text: str) -> dict[str, Any]:
    response = client.post(
        f"/api/v1/sessions/{session.pk}/turns/",
        {"text": text},
        format="json",
        headers={"Idempotency-Key": uuid.uuid4().hex},
    )
    assert response.status_code == 200, response.json()
    return response.json()


def remember_by_turn(client, session: Session, text: str) -> dict[str, Any]:
    """A "remember …" turn, and its card confirmed: the words are a note and in the stream."""
    body = turn(client, session, text)
    [card] = body["cards"]
    confirmed = client.post(f"/api/v1/cards/{card['id']}/confirm/", format="json")
    assert confirmed.status_code == 200, confirmed.json()
    return body


def stream_of(client, session: Session) -> list[dict[str, Any]]:
    return client.get(f"/api/v1/sessions/{session.pk}/events/").json()["events"]


def texts(events: list[dict[str, Any]]) -> str:
    return " | ".join(str(e["body"].get("text", "")) for e in events)


def test_forget_all_redacts_the_turn_in_text_in_the_stream_and_reports_the_count(
    cast, api_as, session, django_capture_on_commit_callbacks
):
    client = api_as(cast.owner)
    remembered = remember_by_turn(client, session, "remember that I lead with sev0")
    turn(client, session, "hello Tess")
    [turn_in] = [e for e in remembered["events"] if e["kind"] == "turn.in"]
    assert "I lead with sev0" in texts(stream_of(client, session))

    with django_capture_on_commit_callbacks(execute=True):
        response = client.delete("/api/v1/memory/?all=true")

    assert response.status_code == 200
    assert response.json() == {"outcome": "deleted", "deleted_count": 1, "redacted_count": 1}
    events = stream_of(client, session)
    assert "sev0" not in texts(events)
    [redacted] = [e for e in events if e["seq"] == turn_in["seq"]]
    assert redacted["kind"] == "turn.in"
    assert redacted["body"] == {**turn_in["body"], "text": REDACTED_TEXT}
    assert redacted["ts"] == turn_in["ts"]
    # The other turn keeps its words, and the consumers are told which seq to re-render.
    assert "hello Tess" in texts(events)
    assert events[-1]["kind"] == "redacted"
    assert events[-1]["body"] == {"seqs": [turn_in["seq"]], "text": REDACTED_TEXT}
    [audit] = AuditEvent.objects.filter(action="memory.forget_all")
    assert (audit.metadata["deleted_count"], audit.metadata["redacted_count"]) == (1, 1)


def test_forgetting_one_note_redacts_only_the_turns_and_replies_that_carried_it(
    cast, api_as, session, django_capture_on_commit_callbacks
):
    client = api_as(cast.owner)
    remember_by_turn(client, session, "remember that I lead with sev0")
    remember_by_turn(client, session, "remember that I prefer short replies")
    # A reply that repeats the note carries it as well (the deterministic adapter names no note, so a
    # model's reply is written as the stream would hold it).
    reply = SessionEvent.objects.filter(session=session, kind="turn.out").order_by("seq").first()
    assert reply is not None
    reply.body = {**reply.body, "text": "Noted: I LEAD  with\nsev0."}
    reply.save()

    with django_capture_on_commit_callbacks(execute=True):
        result = client.post(
            "/api/v1/cards/" + turn(client, session, "forget that I lead with sev0")["cards"][0]["id"] + "/confirm/",
            format="json",
        ).json()

    # The remember turn, the reply repeating it and the forget turn itself.
    assert (result["deleted_count"], result["redacted_count"]) == (1, 3)
    events = stream_of(client, session)
    assert "sev0" not in texts(events)
    assert "I prefer short replies" in texts(events)
    redacted = [e["seq"] for e in events if e["kind"] in ("turn.in", "turn.out") and e["body"]["text"] == REDACTED_TEXT]
    assert events[-1]["body"]["seqs"] == redacted


def test_summaries_that_hold_the_words_are_redacted_and_earlier_ones_kept(
    cast, api_as, session, django_capture_on_commit_callbacks
):
    client = api_as(cast.owner)
    turn(client, session, "hello Tess")
    earlier = ConversationSummary.objects.create(
        session=session, first_seq=1, last_seq=2, text="The operator said hello.", adapter="t", model="m"
    )
    remember_by_turn(client, session, "remember that I lead with sev0")
    covering = ConversationSummary.objects.create(
        session=session, first_seq=3, last_seq=5, text="The operator asked to be led with sev0.", adapter="t", model="m"
    )
    # A later summary folds the one before it in: it may hold the words in other terms.
    later = ConversationSummary.objects.create(
        session=session, first_seq=6, last_seq=8, text="Earlier: a request about incidents.", adapter="t", model="m"
    )

    with django_capture_on_commit_callbacks(execute=True):
        outcome = memory_forget(scope_of(cast.owner, cast.acme), category=None, slot=None, forget_all=True)

    assert outcome.redacted_count == 1 + 2  # the turn.in and two summaries
    for summary in (earlier, covering, later):
        summary.refresh_from_db()
    assert earlier.text == "The operator said hello."
    assert covering.text == later.text == REDACTED_TEXT


def test_another_operators_and_another_tenants_turns_are_left_alone(
    cast, api_as, session, django_capture_on_commit_callbacks
):
    remember_by_turn(api_as(cast.owner), session, "remember that I lead with sev0")
    theirs = SessionFactory.create(owner=cast.teammate, tenant=cast.acme)
    remember_by_turn(api_as(cast.teammate), theirs, "remember that I lead with sev0")
    outside = SessionFactory.create(owner=cast.outsider, tenant=cast.globex)
    remember_by_turn(api_as(cast.outsider, cast.globex), outside, "remember that I lead with sev0")

    with django_capture_on_commit_callbacks(execute=True):
        memory_forget(scope_of(cast.owner, cast.acme), category=None, slot=None, forget_all=True)

    assert "sev0" not in texts(stream_of(api_as(cast.owner), session))
    assert "I lead with sev0" in texts(stream_of(api_as(cast.teammate), theirs))
    assert "I lead with sev0" in texts(stream_of(api_as(cast.outsider, cast.globex), outside))


def test_erasure_redacts_the_stream_and_prints_the_count(cast, api_as, session, capsys):
    remember_by_turn(api_as(cast.owner), session, "remember that I lead with sev0")

    call_command("tess_memory_erase", "--username", "owner")

    out = capsys.readouterr().out
    assert "acme\t1\t1" in out and "redacted 1 stream items" in out
    assert "sev0" not in texts(stream_of(api_as(cast.owner), session))


def test_a_registered_conversation_reset_runs_after_commit_for_each_redacted_session(
    cast, api_as, session, django_capture_on_commit_callbacks, monkeypatch
):
    remember_by_turn(api_as(cast.owner), session, "remember that I lead with sev0")
    calls: list[str] = []
    monkeypatch.setattr(redaction, "_resets", [])
    register_conversation_reset(lambda session_id: calls.append(session_id) or True)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        memory_forget(scope_of(cast.owner, cast.acme), category=None, slot=None, forget_all=True)
    assert calls == []  # nothing outside the database runs before the deletion commits
    for callback in callbacks:
        callback()

    assert calls == [str(session.pk)]


def test_the_cli_stream_says_which_events_now_read_redacted():
    from tess_cli.output import event_line

    line = event_line({"seq": 9, "kind": "redacted", "ts": "", "body": {"seqs": [3, 4], "text": REDACTED_TEXT}})

    assert line.split(None, 2) == ["9", "redacted", "#3, #4 now read (forgotten memory request)"]


def test_a_retried_turn_replays_its_answer_redacted(cast, api_as, session, django_capture_on_commit_callbacks):
    client = api_as(cast.owner)
    key = uuid.uuid4().hex
    url = f"/api/v1/sessions/{session.pk}/turns/"
    first = client.post(url, {"text": "remember that I lead with sev0"}, format="json", HTTP_IDEMPOTENCY_KEY=key)
    client.post(f"/api/v1/cards/{first.json()['cards'][0]['id']}/confirm/", format="json")

    with django_capture_on_commit_callbacks(execute=True):
        memory_forget(scope_of(cast.owner, cast.acme), category=None, slot=None, forget_all=True)
    replay = client.post(url, {"text": "remember that I lead with sev0"}, format="json", HTTP_IDEMPOTENCY_KEY=key)

    assert replay.status_code == 200
    assert replay.json()["turn_id"] == first.json()["turn_id"]
    assert "sev0" not in replay.content.decode()
    [turn_in] = [e for e in replay.json()["events"] if e["kind"] == "turn.in"]
    assert turn_in["body"]["text"] == REDACTED_TEXT
