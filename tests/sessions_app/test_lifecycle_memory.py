"""Lifecycle boundaries leave operational memory (seed 000), and every capture shows in the stream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_app.plugin import operator_memory_plugin
from providers_app.registry import get_provider, reset_instances
from sessions_app import services
from sessions_app.models import Session, SessionEvent
from tests.conftest import Cast, scope_of
from tests.providers_app.pi_writer import PiSessionWriter

pytestmark = pytest.mark.django_db


def sources(cast: Cast) -> list[str]:
    return [r.source for r in operator_memory_plugin().recent(scope_of(cast.owner, cast.acme))]


def system_codes(session: Session) -> list[str]:
    return [e.body["code"] for e in SessionEvent.objects.filter(session=session, kind="system").order_by("seq")]


def test_a_session_that_ends_is_remembered_and_the_capture_is_visible(
    cast, start_session, django_capture_on_commit_callbacks
):
    session = start_session(title="parser work")
    with django_capture_on_commit_callbacks(execute=True):
        assert services.session_mark_exited(session_id=session.pk) is True
    assert sources(cast) == ["session.ended"]
    [record] = operator_memory_plugin().recent(scope_of(cast.owner, cast.acme))
    assert "parser work" in record.text and record.namespace.session == str(session.pk)
    captured = SessionEvent.objects.get(session=session, kind="system")
    assert captured.body["code"] == "memory.captured" and record.id not in captured.body["text"]
    assert "parser work" not in captured.body["text"]  # the stream carries ids, not the record's text


def test_another_operator_never_sees_the_capture(cast, start_session, django_capture_on_commit_callbacks):
    session = start_session()
    with django_capture_on_commit_callbacks(execute=True):
        services.session_mark_exited(session_id=session.pk)
    assert operator_memory_plugin().recent(scope_of(cast.teammate, cast.acme)) == []


@pytest.fixture
def pi_session(cast: Cast, settings, tmp_path: Path) -> Iterator[tuple[Session, PiSessionWriter]]:
    writer = PiSessionWriter(tmp_path / "pi")
    first = writer.user("Refactor the parser")
    writer.assistant("Done; the tests pass.")
    writer.compaction("Refactored the parser; tests pass; next: the lexer.", first_kept=first)
    writer.user("Now the lexer")
    settings.TESS_RUNTIME_PROVIDERS = {"pi1": {"kind": "pi", "sessions_dir": str(tmp_path / "pi")}}
    reset_instances()
    admin = scope_of(cast.admin_user, cast.acme)
    [runtime] = get_provider("pi1").list_sessions(admin)
    session = services.session_adopt(
        scope=admin, instance="pi1", runtime_id=runtime.ref.runtime_id, assignee="owner", title="pi work"
    )
    yield session, writer
    reset_instances()


def test_a_compaction_becomes_a_checkpoint_and_an_operational_memory(
    cast, pi_session, django_capture_on_commit_callbacks
):
    session, _ = pi_session
    with django_capture_on_commit_callbacks(execute=True):
        services.session_pump(session_id=session.pk)
    session.refresh_from_db()
    assert session.checkpoint["summary"] == "Refactored the parser; tests pass; next: the lexer."
    assert session.checkpoint["cursor"]  # where in the stream the compaction happened
    assert system_codes(session) == ["checkpoint", "memory.captured"]
    [record] = operator_memory_plugin().recent(scope_of(cast.owner, cast.acme))
    assert record.source == "checkpoint" and "next: the lexer" in record.text
