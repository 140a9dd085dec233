"""Lifecycle captures are durable work (seed 000): written with the lifecycle change, delivered after it by a
leased task, so a process that dies right after the commit still leaves the capture to be delivered."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.db import transaction

from memory_app.plugin import operator_memory_plugin
from sessions_app import services
from sessions_app.lifecycle import capture_requeue_due
from sessions_app.models import CaptureItem, Session, SessionStatus
from tess_site.leases import LeaseState
from tests.conftest import Cast, scope_of
from tests.factories import SessionFactory
from tests.tess_site.children import ROOT, child_env
from tests.waiting import wait_for

# The child ends the session, and SIGKILLs itself in the first callback after the commit: before the
# wake-up that would deliver the capture is sent (callbacks run in the order they were registered).
DIE_AFTER_COMMIT = """
import os, signal, sys, uuid
import django
django.setup()
from django.db import transaction
from sessions_app import services
with transaction.atomic():
    transaction.on_commit(lambda: os.kill(os.getpid(), signal.SIGKILL))
    assert services.session_mark_exited(session_id=uuid.UUID(sys.argv[1]))
"""


def sources(cast: Cast) -> list[str]:
    return [r.source for r in operator_memory_plugin().recent(scope_of(cast.owner, cast.acme))]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_process_killed_right_after_the_commit_still_gets_its_capture_delivered(cast: Cast) -> None:
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="parser work")
    child = subprocess.run(
        [sys.executable, "-c", DIE_AFTER_COMMIT, str(session.pk)],
        env=child_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9, child.stderr
    assert Session.objects.get(pk=session.pk).status == SessionStatus.EXITED  # the change committed
    item = CaptureItem.objects.get()
    assert (item.state, item.attempts, item.source) == (LeaseState.PENDING, 0, "session.ended")
    assert sources(cast) == []  # the dead process delivered nothing

    # The periodic re-queue (beat's requeue_due_work, the embedded pump's housekeeping) finds it.
    assert wait_for(lambda: capture_requeue_due() == 1, "the capture to be re-queued", timeout=60, interval=0.5)
    assert sources(cast) == ["session.ended"]
    item.refresh_from_db()
    assert (item.state, item.attempts, item.text) == (LeaseState.DONE, 1, "")  # no second copy once delivered
    assert session.events.filter(kind="system", body__code="memory.captured").count() == 1
    assert capture_requeue_due() == 0


@pytest.mark.django_db
def test_a_lifecycle_change_rolled_back_leaves_no_capture(cast: Cast) -> None:
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    with pytest.raises(RuntimeError), transaction.atomic():
        services.session_mark_exited(session_id=session.pk)
        raise RuntimeError("the change fails after the capture was recorded")
    assert not CaptureItem.objects.exists()


@pytest.mark.django_db
def test_a_failed_capture_is_given_back_and_delivered_on_a_later_attempt(
    cast: Cast, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: object
) -> None:
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    plugin = operator_memory_plugin()
    real_capture = plugin.capture

    def unavailable(*args: object, **kwargs: object) -> object:
        raise ConnectionError("memory service down")

    monkeypatch.setattr(plugin, "capture", unavailable)
    with django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
        services.session_mark_exited(session_id=session.pk)
    item = CaptureItem.objects.get()
    assert (item.state, item.attempts, item.last_error) == (LeaseState.PENDING, 1, "ConnectionError")
    assert sources(cast) == []

    monkeypatch.setattr(plugin, "capture", real_capture)
    CaptureItem.objects.filter(pk=item.pk).update(available_at=item.created_at)  # its retry is due now
    with django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
        assert capture_requeue_due() == 1
    assert sources(cast) == ["session.ended"]
    assert CaptureItem.objects.get().state == LeaseState.DONE


@pytest.mark.django_db
def test_a_capture_waiting_for_delivery_is_already_redacted(cast: Cast) -> None:
    from sessions_app.lifecycle import capture_on_commit

    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    secret = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4"
    with transaction.atomic():
        capture_on_commit(session_id=session.pk, source="checkpoint", text=f"used key {secret} to deploy")
        assert secret not in CaptureItem.objects.get().text
