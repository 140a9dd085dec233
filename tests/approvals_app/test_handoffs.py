"""Mos hand-offs: the embedded default, the Redis stream and the signed webhook against real peers, results
into the session stream, the list endpoint, and forged signatures refused."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import redis
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from approvals_app.handoff_adapters import SIGNATURE_HEADER, sign
from approvals_app.handoffs import (
    HandoffTransitionInvalid,
    handoff_create,
    handoff_result_apply,
    handoff_results_read,
    handoffs_requeue_due,
)
from approvals_app.models import Handoff
from sessions_app.models import Session, SessionEvent
from tess_site.audit.models import AuditEvent
from tess_site.leases import LeaseState, claim
from tess_site.refs import resolve
from tess_site.tasks import sweep_expired_leases
from tests.conftest import scope_of
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db
SECRET = "mos-shared-secret-for-tests-0123456789"


@pytest.fixture
def session(cast) -> Session:
    return SessionFactory.create(owner=cast.owner, tenant=cast.acme)


def create(cast, session: Session, summary: str = "fix the flaky login test") -> Handoff:
    scope = scope_of(cast.owner, cast.acme).for_session(str(session.pk))
    return handoff_create(scope, session_id=str(session.pk), summary=summary, payload={"request": summary})


def stream_of(session: Session) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, e.body) for e in SessionEvent.objects.filter(session=session).order_by("seq")]


def test_with_no_adapter_a_handoff_is_recorded_and_stays_queued(cast, session, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        handoff = create(cast, session)
    handoff.refresh_from_db()
    assert (handoff.status, handoff.adapter, handoff.state) == ("queued", "", LeaseState.PENDING)
    assert handoff.attempts == 0
    assert not [c for c in callbacks if "dispatch" in repr(c)]
    assert handoffs_requeue_due() == 0  # nothing will ever wake it without an adapter
    assert stream_of(session) == [("handoff", {"id": str(handoff.pk), "status": "queued", "result": ""})]
    assert AuditEvent.objects.get(action="handoff.created").metadata["adapter"] == "none"


def test_results_move_forward_only(cast, session):
    handoff = create(cast, session)
    handoff_result_apply(handoff_id=handoff.pk, status="completed", result={"summary": "done"}, via="test")
    with pytest.raises(HandoffTransitionInvalid):
        handoff_result_apply(handoff_id=handoff.pk, status="acknowledged", result=None, via="test")
    with pytest.raises(HandoffTransitionInvalid):
        handoff_result_apply(handoff_id=handoff.pk, status="failed", result=None, via="test")
    # The same status again is a harmless repeat (a redelivered stream entry), not an error.
    handoff_result_apply(handoff_id=handoff.pk, status="completed", result={"summary": "done"}, via="test")
    handoff.refresh_from_db()
    assert handoff.status == "completed"


# --- the Redis stream adapter against a real Redis -----------------------------------------------------------


@pytest.fixture
def redis_streams(settings) -> Iterator[tuple[redis.Redis, str, str]]:
    suffix = uuid.uuid4().hex[:8]
    streams = (f"test:mos:handoffs:{suffix}", f"test:mos:results:{suffix}")
    settings.TESS_MOS_ADAPTER = "redis"
    settings.TESS_MOS_HANDOFF_STREAM, settings.TESS_MOS_RESULT_STREAM = streams
    settings.TESS_MOS_RESULT_GROUP = "tess"
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        yield client, *streams
    finally:
        client.delete(*streams)
        client.close()


@pytest.mark.redis
def test_the_redis_adapter_appends_to_the_stream_and_reads_results_through_a_group(
    cast, session, redis_streams, django_capture_on_commit_callbacks
):
    client, handoffs, results = redis_streams
    with django_capture_on_commit_callbacks(execute=True):
        handoff = create(cast, session)
    handoff.refresh_from_db()
    assert (handoff.status, handoff.adapter, handoff.state) == ("dispatched", "redis", LeaseState.DONE)
    entries = client.xrange(handoffs)
    assert len(entries) == 1
    fields = {k.decode(): v.decode() for k, v in entries[0][1].items()}
    assert fields["id"] == str(handoff.pk)
    assert fields["correlation_id"] == "test-correlation"
    assert json.loads(fields["payload"]) == {"request": "fix the flaky login test"}

    client.xadd(results, {"handoff_id": str(handoff.pk), "status": "acknowledged"})
    client.xadd(results, {"handoff_id": str(handoff.pk), "status": "completed", "result": '{"summary": "PR 7 merged"}'})
    assert handoff_results_read() == 2
    handoff.refresh_from_db()
    assert handoff.status == "completed" and handoff.result == {"summary": "PR 7 merged"}
    assert client.xpending(results, "tess")["pending"] == 0  # acknowledged once committed
    assert [b["status"] for kind, b in stream_of(session) if kind == "handoff"] == [
        "queued",
        "dispatched",
        "acknowledged",
        "completed",
    ]
    assert stream_of(session)[-1][1]["result"] == "PR 7 merged"
    assert handoff_results_read() == 0  # nothing read twice


@pytest.mark.redis
def test_a_bad_redis_result_is_acknowledged_and_does_not_block_the_group(cast, session, redis_streams):
    client, _handoffs, results = redis_streams
    handoff = create(cast, session)
    client.xadd(results, {"handoff_id": str(uuid.uuid4()), "status": "completed"})  # unknown hand-off
    client.xadd(results, {"status": "completed"})  # no id
    client.xadd(results, {"handoff_id": str(handoff.pk), "status": "completed"})
    assert handoff_results_read() == 3
    handoff.refresh_from_db()
    assert handoff.status == "completed"
    assert client.xpending(results, "tess")["pending"] == 0


# --- the signed webhook adapter against a real local receiver ---------------------------------------------------


class Receiver:
    """A Mos stand-in: records what it receives and answers with ``status``."""

    def __init__(self) -> None:
        self.received: list[tuple[bytes, str | None]] = []
        self.status = 202
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.received.append((body, self.headers.get(SIGNATURE_HEADER)))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/mos/handoffs"


@contextmanager
def running_receiver(settings: Any) -> Iterator[Receiver]:
    """A receiver, with the webhook adapter pointed at it."""
    mos = Receiver()
    settings.TESS_MOS_ADAPTER = "webhook"
    settings.TESS_MOS_WEBHOOK_URL = mos.url
    settings.TESS_MOS_WEBHOOK_SECRET = SECRET
    try:
        yield mos
    finally:
        mos.server.shutdown()
        mos.server.server_close()


@pytest.fixture
def receiver(settings) -> Iterator[Receiver]:
    with running_receiver(settings) as mos:
        yield mos


def post_result(handoff_id: object, payload: dict[str, Any], signature: str | None) -> Any:
    body = json.dumps(payload).encode()
    headers = {SIGNATURE_HEADER: signature} if signature is not None else {}
    return APIClient().post(
        f"/api/v1/handoffs/{handoff_id}/result/", body, content_type="application/json", headers=headers
    )


def test_the_webhook_adapter_posts_a_signed_body_naming_the_gateway(
    cast, session, receiver, settings, django_capture_on_commit_callbacks
):
    settings.TESS_INSTANCE_ID = "tess-eu-1"
    with django_capture_on_commit_callbacks(execute=True):
        handoff = create(cast, session)
    assert len(receiver.received) == 1
    body, signature = receiver.received[0]
    assert signature == sign(SECRET, body)
    sent = json.loads(body)
    assert sent["id"] == str(handoff.pk) and sent["result_path"] == f"/api/v1/handoffs/{handoff.pk}/result/"
    assert sent["instance"] == "tess-eu-1"
    handoff.refresh_from_db()
    assert (handoff.status, handoff.state) == ("dispatched", LeaseState.DONE)


def test_a_signed_result_reaches_the_session_stream(cast, session, receiver, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        handoff = create(cast, session)
    payload = {"status": "completed", "result": {"summary": "review done: 2 comments"}}
    body = json.dumps(payload).encode()
    response = APIClient().post(
        f"/api/v1/handoffs/{handoff.pk}/result/",
        body,
        content_type="application/json",
        headers={SIGNATURE_HEADER: sign(SECRET, body)},
    )
    assert response.status_code == 200, response.content
    assert response.json() == {"id": str(handoff.pk), "status": "completed"}
    assert stream_of(session)[-1] == (
        "handoff",
        {"id": str(handoff.pk), "status": "completed", "result": "review done: 2 comments"},
    )
    audit = AuditEvent.objects.get(action="handoff.completed")
    assert audit.actor is None and audit.metadata["via"] == "webhook"


@pytest.mark.parametrize("signature", [None, "sha256=" + "0" * 64, "forged"], ids=["missing", "forged", "malformed"])
def test_a_forged_signature_is_refused_and_changes_nothing(cast, session, receiver, signature):
    handoff = create(cast, session)
    response = post_result(handoff.pk, {"status": "completed", "result": {"summary": "pwned"}}, signature)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "signature_invalid"
    handoff.refresh_from_db()
    assert handoff.status == "queued" and handoff.result is None


def test_a_body_signed_with_another_secret_is_refused(cast, session, receiver):
    handoff = create(cast, session)
    body = json.dumps({"status": "completed"}).encode()
    response = APIClient().post(
        f"/api/v1/handoffs/{handoff.pk}/result/",
        body,
        content_type="application/json",
        headers={SIGNATURE_HEADER: sign("another-secret", body)},
    )
    assert response.status_code == 403


def test_without_a_configured_secret_nothing_verifies(cast, session, settings):
    handoff = create(cast, session)
    settings.TESS_MOS_WEBHOOK_SECRET = ""
    body = json.dumps({"status": "completed"}).encode()
    assert post_result(handoff.pk, {"status": "completed"}, sign("", body)).status_code == 403


def test_a_signed_result_for_an_unknown_handoff_is_404(receiver):
    payload = {"status": "completed"}
    response = post_result(uuid.uuid4(), payload, sign(SECRET, json.dumps(payload).encode()))
    assert response.status_code == 404


def test_a_signed_backwards_result_is_409(cast, session, receiver):
    handoff = create(cast, session)
    handoff_result_apply(handoff_id=handoff.pk, status="completed", result=None, via="test")
    payload = {"status": "acknowledged"}
    response = post_result(handoff.pk, payload, sign(SECRET, json.dumps(payload).encode()))
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "handoff_transition_invalid"


def test_a_failing_receiver_leaves_the_handoff_queued_for_a_retry(
    cast, session, receiver, django_capture_on_commit_callbacks
):
    receiver.status = 503
    with django_capture_on_commit_callbacks(execute=True):
        handoff = create(cast, session)
    handoff.refresh_from_db()
    assert (handoff.status, handoff.state, handoff.attempts) == ("queued", LeaseState.PENDING, 1)
    assert handoff.last_error == "webhook_status_503"
    assert handoff.available_at > handoff.created_at  # backed off, not retried at once


def test_a_receiver_refusing_for_good_fails_the_handoff(cast, session, receiver, django_capture_on_commit_callbacks):
    receiver.status = 400
    with django_capture_on_commit_callbacks(execute=True):
        handoff = create(cast, session)
    handoff.refresh_from_db()
    assert (handoff.status, handoff.state) == ("failed", LeaseState.FAILED)
    assert handoff.result == {"error": "webhook_status_400"}


# --- the list endpoint and pins -------------------------------------------------------------------------------


def test_the_list_shows_your_own_handoffs_in_few_queries(cast, session, api_as, django_assert_max_num_queries):
    mine = [create(cast, session, f"fix bug {i}") for i in range(5)]
    other = SessionFactory.create(owner=cast.teammate, tenant=cast.acme, title="t")
    handoff_create(scope_of(cast.teammate, cast.acme), session_id=str(other.pk), summary="review theirs", payload={})
    client = api_as(cast.owner)
    with django_assert_max_num_queries(6):
        response = client.get("/api/v1/handoffs/")
    assert response.status_code == 200
    assert {row["id"] for row in response.json()["results"]} == {str(h.pk) for h in mine}
    assert response.json()["results"][0]["requester"] == "owner"


def test_teammates_and_outsiders_do_not_see_your_handoffs(cast, session, api_as):
    create(cast, session)
    assert api_as(cast.teammate).get("/api/v1/handoffs/").json()["results"] == []
    assert api_as(cast.outsider, cast.globex).get("/api/v1/handoffs/").json()["results"] == []


def test_auditors_see_the_tenants_handoffs(cast, session, api_as):
    handoff = create(cast, session)
    rows = api_as(cast.auditor).get("/api/v1/handoffs/").json()["results"]
    assert [row["id"] for row in rows] == [str(handoff.pk)]


def test_the_list_needs_a_credential():
    assert APIClient().get("/api/v1/handoffs/").status_code in (401, 403)


def test_a_handoff_pin_resolves_only_for_who_may_read_it(cast, session):
    handoff = create(cast, session)
    assert resolve(scope_of(cast.owner, cast.acme), f"handoff:{handoff.pk}")
    assert not resolve(scope_of(cast.teammate, cast.acme), f"handoff:{handoff.pk}")
    assert not resolve(scope_of(cast.outsider, cast.globex), f"handoff:{handoff.pk}")


@override_settings(
    TESS_MOS_ADAPTER="webhook", TESS_MOS_WEBHOOK_URL="http://127.0.0.1:9/none", TESS_MOS_WEBHOOK_SECRET=SECRET
)
def test_a_due_retry_is_woken_by_the_requeue(cast, session, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        handoff = create(cast, session)  # port 9 refuses: a transient failure
    handoff.refresh_from_db()
    assert handoff.attempts == 1 and handoff.state == LeaseState.PENDING
    Handoff.objects.filter(pk=handoff.pk).update(
        available_at=handoff.created_at, created_at=handoff.created_at.replace(year=2020)
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert handoffs_requeue_due() == 1
    handoff.refresh_from_db()
    assert handoff.attempts == 2


def test_a_dead_workers_claim_is_swept_and_dispatched_once(cast, session, receiver, django_capture_on_commit_callbacks):
    receiver.status = 503  # the first dispatch fails, so the item is still ours to claim
    with django_capture_on_commit_callbacks(execute=True):
        handoff = create(cast, session)
    receiver.status = 202
    Handoff.objects.filter(pk=handoff.pk).update(available_at=handoff.created_at)
    assert claim(Handoff, pk=handoff.pk, worker="dead-worker") is not None  # claimed, then the worker died
    Handoff.objects.filter(pk=handoff.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert sweep_expired_leases() >= 1
    handoff.refresh_from_db()
    assert (handoff.status, handoff.state) == ("dispatched", LeaseState.DONE)
    assert len(receiver.received) == 2  # the failed attempt and the one after the sweep; never a third
