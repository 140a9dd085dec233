"""What a serving process keeps of a conversation between turns: a turn reads only the events since the
last one it read, and answers exactly as if it had read the whole conversation; a summary or a redaction
made anywhere (the session's ``conversation_version``) makes every process read it again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings

from providers_app.model_adapters import DeterministicAdapter
from sessions_app import selectors, stream
from sessions_app.conversation import (
    PendingSummary,
    conversation_build,
    conversation_changed,
    conversation_summary_store,
)
from sessions_app.conversation_items import conversation_kept_clear
from sessions_app.gateway import turn_handle
from sessions_app.journal import event_append, events_append
from sessions_app.models import Session, SessionEvent
from tess_site.scope import Channel
from tests.conftest import scope_of
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def nothing_kept() -> Iterator[None]:
    conversation_kept_clear()
    yield
    conversation_kept_clear()


@pytest.fixture
def session(cast) -> Session:
    return SessionFactory.create(owner=cast.owner, tenant=cast.acme)


def ask(cast, session: Session, text: str) -> None:
    turn_handle(scope=scope_of(cast.owner, cast.acme, Channel.CLI), session_id=str(session.pk), text=text)


def built(session: Session) -> tuple[dict[str, str], ...]:
    return conversation_build(session=session, adapter=DeterministicAdapter()).messages


def read_afresh(session: Session) -> tuple[dict[str, str], ...]:
    conversation_kept_clear()
    return built(session)


def conversation_reads(session: Session, monkeypatch) -> list[int]:
    """The ``after`` of each read of conversation events ``built`` makes, and the rows each read."""
    reads: list[int] = []
    read = selectors.conversation_events

    def spy(*, session_id, after, **kw):
        reads.append(after)
        return read(session_id=session_id, after=after, **kw)

    with monkeypatch.context() as patched:
        patched.setattr(selectors, "conversation_events", spy)
        built(session)
    return reads


def test_a_turn_reads_only_the_events_after_the_ones_it_kept(cast, session, monkeypatch):
    for n in range(6):
        ask(cast, session, f"what changed since step {n}?")
    built(session)
    last = Session.objects.get(pk=session.pk).last_seq
    ask(cast, session, "and now?")

    reads = conversation_reads(session, monkeypatch)

    assert reads == [last]
    assert built(session) == read_afresh(session)
    assert built(session)[-1]["role"] == "assistant"
    assert any(m["content"] == "and now?" for m in built(session))


def test_what_was_kept_answers_as_a_whole_read_would_across_a_repeated_status(cast, session):
    ask(cast, session, "first question")
    event_append(session_id=session.pk, kind=stream.EventKind.STATUS, body={"status": "terminated"})
    built(session)  # keeps the conversation up to the first "terminated"
    event_append(session_id=session.pk, kind=stream.EventKind.STATUS, body={"status": "terminated"})
    ask(cast, session, "second question")

    kept = built(session)

    assert kept == read_afresh(session)
    assert [m["content"] for m in kept].count("The session was terminated.") == 1


def test_a_summary_stored_elsewhere_is_in_the_next_prompt_not_what_was_kept(cast, session):
    for n in range(4):
        ask(cast, session, f"question {n}")
    before = built(session)
    assert not any("Summary of the earlier conversation" in m["content"] for m in before)
    last = Session.objects.get(pk=session.pk).last_seq
    # Another process summarised the conversation (the version moves in the same transaction).
    pending = PendingSummary(first_seq=1, last_seq=last, text="they asked four questions", adapter="x", model="x")
    conversation_summary_store(session_id=session.pk, pending=pending)

    after = built(session)

    assert "they asked four questions" in after[0]["content"]
    assert not any(m["content"].startswith("question") for m in after)


def test_a_redaction_announced_by_the_version_is_read_again(cast, session):
    ask(cast, session, "remember-ish words that will go")
    assert any(m["content"] == "remember-ish words that will go" for m in built(session))
    event = SessionEvent.objects.get(session=session, kind=stream.EventKind.TURN_IN)
    SessionEvent.objects.filter(pk=event.pk).update(body={**event.body, "text": "(forgotten memory request)"})
    # Kept without a word from the version: the process still has the old words (what the version is for).
    assert any(m["content"] == "remember-ish words that will go" for m in built(session))

    conversation_changed(session_id=session.pk)

    contents = [m["content"] for m in built(session)]
    assert "remember-ish words that will go" not in contents
    assert "(forgotten memory request)" in contents


@override_settings(TESS_CONVERSATION_TOKENS=1024)
def test_a_conversation_too_long_to_keep_is_read_from_the_database_whole(cast, session, monkeypatch):
    long_turns = [(stream.EventKind.TURN_IN, stream.turn_in_body(turn_id=f"t{n}", channel="cli", text="word " * 400))
                  for n in range(12)]  # fmt: skip
    events_append(session_id=session.pk, items=long_turns)
    built(session)
    events_append(session_id=session.pk, items=long_turns[:1])

    assert conversation_reads(session, monkeypatch) == [0]  # nothing was kept: read from the start
    assert built(session) == read_afresh(session)


@override_settings(TESS_CONVERSATION_CACHE_SESSIONS=0)
def test_with_nothing_kept_every_turn_reads_the_whole_conversation(cast, session, monkeypatch):
    for n in range(3):
        ask(cast, session, f"question {n}")
    built(session)

    reads = conversation_reads(session, monkeypatch)

    assert reads == [0]
    assert built(session) == read_afresh(session)
