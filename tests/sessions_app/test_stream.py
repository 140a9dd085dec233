"""The event stream: gap-free sequence numbers, written with the change, wake-ups only after commit."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from sessions_app import events, services
from sessions_app.models import Session, SessionEvent
from sessions_app.stream import EventKind, system_body
from tess_site.refs import resolve
from tests.conftest import scope_of

pytestmark = pytest.mark.django_db


class Undo(Exception):
    pass


def _session(cast) -> Session:
    return Session.objects.create(
        tenant=cast.acme, owner=cast.owner, title="t", provider_instance="alpha", runtime_id="$9"
    )


def test_events_get_consecutive_numbers_from_one(cast):
    session = _session(cast)
    for i in range(3):
        services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text=str(i)))
    rows = services.events_append(
        session_id=session.pk,
        items=[(EventKind.SYSTEM, system_body(text="a")), (EventKind.SYSTEM, system_body(text="b"))],
    )
    assert [r.seq for r in rows] == [4, 5]
    assert list(session.events.values_list("seq", flat=True)) == [1, 2, 3, 4, 5]
    session.refresh_from_db()
    assert session.last_seq == 5


def test_an_event_of_a_rolled_back_change_leaves_no_trace_and_no_gap(cast):
    session = _session(cast)
    services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text="kept"))
    with pytest.raises(Undo), transaction.atomic():
        services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text="undone"))
        raise Undo
    services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text="next"))
    assert [(e.seq, e.body["text"]) for e in session.events.all()] == [(1, "kept"), (2, "next")]


def test_consumers_are_woken_only_after_commit_with_the_newest_seq(
    cast, monkeypatch, django_capture_on_commit_callbacks
):
    session = _session(cast)
    sent: list[tuple[str, dict]] = []
    monkeypatch.setattr(events, "_send", lambda group, message: sent.append((group, message)))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.events_append(
            session_id=session.pk,
            items=[(EventKind.SYSTEM, system_body(text="a")), (EventKind.SYSTEM, system_body(text="b"))],
        )
    assert sent == []  # nothing before the commit
    for callback in callbacks:
        callback()
    assert sent == [(events.session_group(session.pk), {"type": "stream.wake", "seq": 2})]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_get_a_gap_free_strictly_increasing_sequence(cast):
    session = _session(cast)
    barrier = threading.Barrier(8)

    def write(n: int) -> None:
        try:
            barrier.wait()
            for i in range(25):
                services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text=f"{n}-{i}"))
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert list(SessionEvent.objects.filter(session=session).order_by("seq").values_list("seq", flat=True)) == list(
        range(1, 201)
    )
    assert len({e.body["text"] for e in SessionEvent.objects.filter(session=session)}) == 200


def test_a_pinned_session_reference_resolves_only_for_those_who_can_read_it(cast):
    session = _session(cast)
    ref = f"session:{session.pk}"
    assert resolve(scope_of(cast.owner, cast.acme), ref)
    assert not resolve(scope_of(cast.teammate, cast.acme), ref)
    assert not resolve(scope_of(cast.outsider, cast.globex), ref)
    services.session_grant(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, grantee=cast.teammate)
    assert resolve(scope_of(cast.teammate, cast.acme), ref)
    services.session_revoke(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, grantee=cast.teammate)
    assert not resolve(scope_of(cast.teammate, cast.acme), ref)
    assert not resolve(scope_of(cast.owner, cast.acme), "session:not-a-uuid")


def test_a_group_grant_makes_a_session_visible_to_the_groups_members(cast):
    from django.contrib.auth.models import Group
    from guardian.shortcuts import assign_perm

    from sessions_app.selectors import sessions_visible

    session = _session(cast)
    group = Group.objects.create(name="oncall")
    cast.teammate.groups.add(group)
    assert not sessions_visible(scope=scope_of(cast.teammate, cast.acme)).exists()
    assign_perm("view_session", group, session)
    assert list(sessions_visible(scope=scope_of(cast.teammate, cast.acme))) == [session]
    assert not sessions_visible(scope=scope_of(cast.outsider, cast.globex)).exists()
