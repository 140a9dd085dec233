"""Every capture is announced to observers (the session stream) after commit, and only then."""

from __future__ import annotations

import pytest
from django.db import transaction

from memory_app.plugin import register_capture_observer
from memory_app.plugin.observers import unregister_capture_observer


@pytest.fixture
def heard():
    calls = []

    def observer(scope, record):
        calls.append((scope.session, record.source, record.id))

    register_capture_observer(observer)
    yield calls
    unregister_capture_observer(observer)


@pytest.mark.django_db(transaction=True)
def test_observers_hear_each_capture_after_commit(cast, make_plugin, session_scope, heard):
    with transaction.atomic():
        record = make_plugin().capture(session_scope(session="s7"), source="handoff.completed", text="done").record
        assert heard == []
    assert heard == [("s7", "handoff.completed", record.id)]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_capture_is_never_announced(cast, make_plugin, session_scope, heard):
    with pytest.raises(RuntimeError), transaction.atomic():
        make_plugin().capture(session_scope(), source="checkpoint", text="lost")
        raise RuntimeError("rolled back")
    assert heard == []


@pytest.mark.django_db(transaction=True)
def test_a_failing_observer_does_not_fail_the_capture(cast, make_plugin, session_scope, heard):
    def broken(scope, record):
        raise ValueError("observer bug")

    register_capture_observer(broken)
    try:
        make_plugin().capture(session_scope(), source="checkpoint", text="kept")
    finally:
        unregister_capture_observer(broken)
    assert len(heard) == 1
