"""Idempotency-Key on every effect-causing POST (IETF draft and Stripe's documented behaviour)."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test import RequestFactory
from django.utils import timezone

from sessions_app.idempotency import request_fingerprint
from sessions_app.models import IdempotencyRecord, IdempotencyState, InboxItem, RuntimeAttachment, Session
from sessions_app.tasks import purge_idempotency_records

from .conftest import output_of, pump_until

pytestmark = pytest.mark.django_db


def _messages(session):
    return f"/api/v1/sessions/{session.pk}/messages/"


def _post(client, path, body, key):
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    return client.post(path, body, format="json", **headers)


@pytest.fixture
def attached(cast, api_as, start_session):
    """The owner's client, interactively attached to a fresh session."""
    session = start_session()
    client = api_as(cast.owner)
    assert (
        _post(client, f"/api/v1/sessions/{session.pk}/attach/", {"mode": "interactive"}, "attach-1").status_code == 200
    )
    return client, session


@pytest.mark.parametrize("tail", ["messages/", "attach/", "detach/", "terminate/"])
def test_every_effect_causing_post_needs_a_key(cast, api_as, start_session, tail):
    session = start_session()
    response = _post(api_as(cast.owner), f"/api/v1/sessions/{session.pk}/{tail}", {"text": "x"}, None)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "idempotency_key_required"


def test_creating_a_session_needs_a_key(cast, api_as, tmux):
    response = _post(api_as(cast.owner), "/api/v1/sessions/", {"provider": "alpha", "title": "t"}, None)
    assert response.status_code == 400
    assert not Session.objects.exists()


def test_a_key_longer_than_255_characters_is_refused(attached):
    client, session = attached
    assert _post(client, _messages(session), {"text": "x"}, "k" * 256).status_code == 400
    assert _post(client, _messages(session), {"text": "x"}, "k" * 255).status_code == 202


def test_the_same_key_and_body_replays_the_stored_response_without_a_second_effect(attached):
    client, session = attached
    first = _post(client, _messages(session), {"text": "once"}, "key-1")
    second = _post(client, _messages(session), {"text": "once"}, "key-1")
    assert first.status_code == second.status_code == 202
    assert second.json() == first.json()
    assert second["Idempotency-Replayed"] == "true"
    assert "Idempotency-Replayed" not in first
    assert InboxItem.objects.count() == 1


def test_key_order_in_the_body_does_not_make_another_request(cast, api_as, start_session):
    session = start_session()
    client = api_as(cast.owner)
    path = f"/api/v1/sessions/{session.pk}/attach/"
    assert (
        client.post(
            path, '{"mode": "read_only", "x": 1}', content_type="application/json", HTTP_IDEMPOTENCY_KEY="k"
        ).status_code
        == 200
    )
    again = client.post(
        path, '{"x": 1, "mode": "read_only"}', content_type="application/json", HTTP_IDEMPOTENCY_KEY="k"
    )
    assert again["Idempotency-Replayed"] == "true"


def test_the_same_key_with_another_body_is_422(attached):
    client, session = attached
    assert _post(client, _messages(session), {"text": "one"}, "key-1").status_code == 202
    response = _post(client, _messages(session), {"text": "two"}, "key-1")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "idempotency_key_reused"
    assert InboxItem.objects.count() == 1


def test_the_same_key_on_another_route_is_422(attached):
    client, session = attached
    assert _post(client, _messages(session), {"text": "one"}, "key-1").status_code == 202
    assert _post(client, f"/api/v1/sessions/{session.pk}/detach/", {"text": "one"}, "key-1").status_code == 422


def test_a_retry_while_the_first_is_in_flight_is_409(cast, attached):
    client, session = attached
    request = RequestFactory().post(_messages(session), {"text": "slow"}, content_type="application/json")
    IdempotencyRecord.objects.create(
        tenant=cast.acme, actor=cast.owner, key="key-1", fingerprint=request_fingerprint(request)
    )
    response = _post(client, _messages(session), {"text": "slow"}, "key-1")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "idempotency_request_in_flight"
    assert not InboxItem.objects.exists()


def test_a_record_left_in_flight_by_a_crashed_request_is_taken_over_after_the_lock_time(cast, attached, settings):
    client, session = attached
    request = RequestFactory().post(_messages(session), {"text": "again"}, content_type="application/json")
    IdempotencyRecord.objects.create(
        tenant=cast.acme,
        actor=cast.owner,
        key="key-1",
        fingerprint=request_fingerprint(request),
        created_at=timezone.now() - timedelta(seconds=settings.TESS_IDEMPOTENCY_LOCK_SECONDS + 1),
    )
    assert _post(client, _messages(session), {"text": "again"}, "key-1").status_code == 202
    assert IdempotencyRecord.objects.get(key="key-1").state == IdempotencyState.DONE


def test_validation_failures_are_not_stored(attached):
    client, session = attached
    assert _post(client, _messages(session), {"text": ""}, "key-1").status_code == 400
    assert not IdempotencyRecord.objects.filter(key="key-1").exists()
    assert _post(client, _messages(session), {"text": "fixed"}, "key-1").status_code == 202


def test_typed_errors_of_an_executed_request_are_replayed(cast, api_as, start_session):
    session = start_session()
    Session.objects.filter(pk=session.pk).update(status="exited")
    client = api_as(cast.owner)
    path = f"/api/v1/sessions/{session.pk}/terminate/"
    first = _post(client, path, {}, "term-1")
    again = _post(client, path, {}, "term-1")
    assert first.status_code == again.status_code == 409
    assert first.json()["error"]["code"] == "session_not_running"
    assert again.json() == first.json()
    assert again["Idempotency-Replayed"] == "true"


def test_keys_are_scoped_to_the_actor(cast, api_as, start_session):
    mine, theirs = start_session(), start_session(user=cast.teammate)
    owner, teammate = api_as(cast.owner), api_as(cast.teammate)
    assert _post(owner, f"/api/v1/sessions/{mine.pk}/attach/", {}, "shared").status_code == 200
    response = _post(teammate, f"/api/v1/sessions/{theirs.pk}/attach/", {}, "shared")
    assert response.status_code == 200 and "Idempotency-Replayed" not in response
    assert RuntimeAttachment.objects.count() == 2


def test_keys_are_scoped_to_the_tenant(cast, api_as, start_session):
    from tess_site.accounts import services as accounts
    from tess_site.scope import Role

    accounts.membership_grant(tenant=cast.globex, user=cast.owner, role=Role.OPERATOR)
    session = start_session()
    acme = api_as(cast.owner)
    assert _post(acme, f"/api/v1/sessions/{session.pk}/attach/", {}, "shared").status_code == 200
    # The same key from the same person in another tenant is a new request (here: a session it cannot see).
    assert (
        _post(api_as(cast.owner, cast.globex), f"/api/v1/sessions/{session.pk}/attach/", {}, "shared").status_code
        == 404
    )


def test_records_are_purged_after_24_hours(cast):
    old = IdempotencyRecord.objects.create(tenant=cast.acme, actor=cast.owner, key="old", fingerprint="f")
    IdempotencyRecord.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=24, seconds=1))
    IdempotencyRecord.objects.create(tenant=cast.acme, actor=cast.owner, key="young", fingerprint="f")
    assert purge_idempotency_records() == 1
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["young"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_requests_with_one_key_deliver_once(cast, api_as, start_session):
    session = start_session()
    clients = [api_as(cast.owner) for _ in range(20)]
    assert _post(clients[0], f"/api/v1/sessions/{session.pk}/attach/", {"mode": "interactive"}, "a").status_code == 200
    barrier = threading.Barrier(len(clients))
    results: list[tuple[int, bool]] = []
    key = uuid.uuid4().hex

    def send(client) -> None:
        try:
            barrier.wait()
            response = _post(client, _messages(session), {"text": "exactly-once"}, key)
            results.append((response.status_code, response.get("Idempotency-Replayed") == "true"))
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 20
    executed = [r for r in results if r == (202, False)]
    assert len(executed) == 1, results
    assert all(r in ((202, True), (409, False)) for r in results if r != (202, False)), results
    assert InboxItem.objects.count() == 1
    pump_until(session, "got:exactly-once")
    assert output_of(session).count("got:exactly-once") == 1
    assert session.events.filter(kind="message.in").count() == 1
