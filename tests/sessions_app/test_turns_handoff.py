"""A Mos hand-off end to end: a coding turn, the signed webhook to a real receiver, the signed result back,
and the result in the operator's stream."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from rest_framework.test import APIClient

from approvals_app.handoff_adapters import SIGNATURE_HEADER, sign
from approvals_app.models import Handoff
from sessions_app.models import SessionEvent
from tests.approvals_app.test_handoffs import SECRET, Receiver, running_receiver
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver(settings) -> Iterator[Receiver]:
    with running_receiver(settings) as mos:
        yield mos


def test_a_coding_turn_reaches_mos_and_its_result_reaches_the_stream(
    cast, api_as, receiver, django_capture_on_commit_callbacks
):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(cast.owner).post(
            f"/api/v1/sessions/{session.pk}/turns/",
            {"text": "review the retry patch"},
            format="json",
            headers={"Idempotency-Key": uuid.uuid4().hex, "X-Correlation-ID": "corr-handoff-e2e"},
        )
    body = response.json()
    assert body["intent"] == "handoff"
    assert "its result will appear in this session" in body["reply"]
    handoff = Handoff.objects.get(pk=body["handoffs"][0]["id"])
    assert handoff.status == "dispatched"
    sent, signature = receiver.received[0]
    assert signature == sign(SECRET, sent)
    envelope = json.loads(sent)
    assert envelope["correlation_id"] == "corr-handoff-e2e"
    assert envelope["payload"]["request"] == "review the retry patch"

    result = json.dumps({"status": "completed", "result": {"summary": "approved with 1 nit"}}).encode()
    with django_capture_on_commit_callbacks(execute=True):
        answered = APIClient().post(
            envelope["result_path"],
            result,
            content_type="application/json",
            headers={SIGNATURE_HEADER: sign(SECRET, result)},
        )
    assert answered.status_code == 200
    last = SessionEvent.objects.filter(session=session, kind="handoff").order_by("-seq").first()
    assert last is not None
    assert last.body == {"id": str(handoff.pk), "status": "completed", "result": "approved with 1 nit"}
    # seed 000: a completed hand-off is remembered for the session's owner, visibly.
    from memory_app.plugin import operator_memory_plugin
    from tests.conftest import scope_of

    [record] = operator_memory_plugin().recent(scope_of(session.owner, session.tenant))
    assert record.source == "handoff.completed" and "approved with 1 nit" in record.text
    captured = SessionEvent.objects.filter(session=session).order_by("-seq").first()
    assert captured is not None and captured.body["code"] == "memory.captured"
