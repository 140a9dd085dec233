"""Tasks: ids in, claims by conditional update, retries only for transient provider errors."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery.exceptions import Retry
from django.utils import timezone

from providers_app.contract import ProviderConflict, ProviderUnavailable
from providers_app.registry import get_provider
from sessions_app import services
from sessions_app.models import AttachMode, InboxItem, IngressBinding
from sessions_app.tasks import deliver_inbox_item, pump_session, requeue_due_work
from tess_site.leases import LeaseLost, LeaseState, claim, new_worker_id
from tests.conftest import scope_of

from .conftest import output_of, pump_until

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(cast, start_session):
    """A message queued for a running session, its delivery task not yet run."""
    session = start_session()
    scope = scope_of(cast.owner, cast.acme)
    services.session_attach(scope=scope, session_id=session.pk, mode=AttachMode.INTERACTIVE)
    item = services.message_enqueue(scope=scope, session_id=session.pk, text="queued")  # on_commit never runs here
    return session, item


def _failing(monkeypatch, error):
    provider = get_provider("alpha")

    def send_message(*args, **kwargs):
        raise error

    monkeypatch.setattr(provider, "send_message", send_message)


def test_a_delivery_task_runs_its_item_once_however_often_it_is_called(queued):
    session, item = queued
    assert deliver_inbox_item(item.pk) is True
    assert deliver_inbox_item(item.pk) is False  # done: nothing to claim
    assert pump_until(session, "got:queued").count("got:queued") == 1


def test_a_worker_that_typed_and_lost_its_lease_does_not_make_the_retry_type_again(cast, queued, monkeypatch):
    session, item = queued
    real_complete = services.complete
    monkeypatch.setattr(services, "complete", lambda *args, **kwargs: False)  # the sweeper took the lease meanwhile
    with pytest.raises(LeaseLost):
        services.inbox_deliver(item_id=item.pk, worker="slow-worker")
    monkeypatch.setattr(services, "complete", real_complete)
    InboxItem.objects.filter(pk=item.pk).update(state=LeaseState.PENDING)  # as the sweeper does
    assert services.inbox_deliver(item_id=item.pk, worker="next-worker") is True
    item.refresh_from_db()
    assert item.state == LeaseState.DONE and item.delivered_seq is not None
    later = services.message_enqueue(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, text="later")
    assert services.inbox_deliver(item_id=later.pk, worker="next-worker") is True
    assert pump_until(session, "got:later").count("got:queued") == 1  # typed once, before what came next


def test_an_item_another_worker_holds_is_left_alone(queued):
    session, item = queued
    assert claim(InboxItem, pk=item.pk, worker=new_worker_id()) is not None
    assert deliver_inbox_item(item.pk) is False
    services.session_pump(session_id=session.pk)
    assert "got:queued" not in output_of(session)


def test_a_transient_failure_puts_the_item_back_with_a_delay(queued, monkeypatch):
    _session, item = queued
    _failing(monkeypatch, ProviderUnavailable())
    assert deliver_inbox_item.apply(args=(item.pk,)).get() is False  # as the embedded default runs it
    item.refresh_from_db()
    assert (item.state, item.attempts, item.last_error) == (LeaseState.PENDING, 1, "provider_unavailable")
    assert item.available_at > timezone.now()


def test_a_worker_task_retries_a_transient_failure_with_backoff(queued, monkeypatch):
    _session, item = queued
    _failing(monkeypatch, ProviderUnavailable())
    retries: list[tuple[str, int]] = []

    def retry(exc, countdown):
        retries.append((exc.code, countdown))
        return Retry(exc=exc, when=countdown)

    monkeypatch.setattr(deliver_inbox_item, "retry", retry)
    deliver_inbox_item.push_request(retries=2, is_eager=False, called_directly=False, id="t-1")
    try:
        with pytest.raises(Retry):
            deliver_inbox_item.run(item.pk)
    finally:
        deliver_inbox_item.pop_request()
    assert retries == [("provider_unavailable", 8)]  # 2 ** (retries + 1) seconds
    item.refresh_from_db()
    assert item.state == LeaseState.PENDING and item.available_at > timezone.now() + timedelta(seconds=7)


def test_a_permanent_failure_is_not_retried_and_is_said_in_the_stream(queued, monkeypatch):
    session, item = queued
    _failing(monkeypatch, ProviderConflict())
    assert deliver_inbox_item(item.pk) is False
    item.refresh_from_db()
    assert (item.state, item.last_error) == (LeaseState.FAILED, "provider_conflict")
    assert session.events.order_by("-seq").first().body == {
        "text": f"message {item.pk} was not delivered",
        "code": "provider_conflict",
    }


def test_items_due_again_after_a_transient_failure_are_woken(queued, django_capture_on_commit_callbacks):
    _session, item = queued
    InboxItem.objects.filter(pk=item.pk).update(created_at=timezone.now() - timedelta(minutes=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert requeue_due_work() == 1
    item.refresh_from_db()
    assert item.state == LeaseState.DONE


def test_the_pump_task_takes_a_session_id(queued, tmux):
    session, _ = queued
    tmux.tmux("send-keys", "-t", session.runtime_id, "-l", "pumped")
    tmux.tmux("send-keys", "-t", session.runtime_id, "Enter")
    pump_until(session, "got:pumped")
    assert pump_session(str(session.pk)) == 0


def test_an_external_reference_binds_one_active_session_and_moves_when_rebound(cast, start_session):
    first, second = start_session(title="a"), start_session(title="b")
    scope = scope_of(cast.owner, cast.acme)
    services.ingress_bind(scope=scope, session_id=first.pk, channel="discord", external_ref="chan-1")
    services.ingress_bind(scope=scope, session_id=second.pk, channel="discord", external_ref="chan-1")
    active = IngressBinding.objects.filter(active=True)
    assert [(b.session_id, b.external_ref) for b in active] == [(second.pk, "chan-1")]
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        IngressBinding.objects.create(session=first, channel="discord", external_ref="chan-1")
