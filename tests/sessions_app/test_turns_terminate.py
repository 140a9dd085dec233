"""The terminate flow through a turn, on a real tmux server: the operator asks Tess in words, an approver
approves through the one-time link, the runtime is gone exactly once, and the operator's stream says so."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.core import mail

from approvals_app.models import Approval
from sessions_app.models import SessionStatus
from tests.approvals_app.approval_fixtures import LINK_RE
from tests.conftest import csrf_token

pytestmark = pytest.mark.django_db


def runtimes(tmux: Any) -> list[str]:
    return tmux.tmux("list-sessions", "-F", "#{session_id}").split()


def test_asking_tess_to_terminate_ends_the_runtime_once_an_approver_approves(
    cast, tmux, start_session, api_as, browser_as, django_capture_on_commit_callbacks
):
    cast.approver.email = "approver@example.test"
    cast.approver.save(update_fields=["email"])
    session = start_session()
    operator = api_as(cast.owner)
    with django_capture_on_commit_callbacks(execute=True):
        asked = operator.post(
            f"/api/v1/sessions/{session.pk}/turns/",
            {"text": "please terminate this session"},
            format="json",
            headers={"Idempotency-Key": uuid.uuid4().hex},
        )
    assert asked.status_code == 200, asked.content
    approval_id = asked.json()["approvals"][0]["id"]
    assert session.runtime_id in runtimes(tmux)  # asking changes nothing

    tokens = [t for m in mail.outbox if m.to == ["approver@example.test"] for t in LINK_RE.findall(str(m.body))]
    assert len(tokens) == 1
    approver = browser_as(cast.approver)
    with django_capture_on_commit_callbacks(execute=True):
        decided = approver.post(
            f"/approvals/{tokens[0]}/", {"decision": "approve", "csrfmiddlewaretoken": csrf_token(approver)}
        )
    assert decided.status_code == 200
    assert session.runtime_id not in runtimes(tmux)
    session.refresh_from_db()
    assert session.status == SessionStatus.TERMINATED
    assert Approval.objects.get(pk=approval_id).execution == "executed"

    events = operator.get(f"/api/v1/sessions/{session.pk}/events/").json()["events"]
    kinds = [e["kind"] for e in events]
    assert kinds.index("turn.in") < kinds.index("approval") < kinds.index("turn.out")
    assert [e["body"]["status"] for e in events if e["kind"] == "approval"] == ["pending", "approved", "executed"]
    assert [e["body"]["status"] for e in events if e["kind"] == "status"] == ["running", "terminated"]


def test_asking_tess_to_terminate_a_pi_session_fails_closed_and_asks_no_approver(
    cast, settings, api_as, django_capture_on_commit_callbacks
):
    from providers_app.registry import reset_instances
    from tests.factories import SessionFactory

    cast.approver.email = "approver@example.test"
    cast.approver.save(update_fields=["email"])
    settings.TESS_RUNTIME_PROVIDERS = {"replay": {"kind": "pi", "sessions_dir": "turn-terminate-test"}}
    reset_instances()
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="replay")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            asked = api_as(cast.owner).post(
                f"/api/v1/sessions/{session.pk}/turns/",
                {"text": "please terminate this session"},
                format="json",
                headers={"Idempotency-Key": uuid.uuid4().hex},
            )
    finally:
        reset_instances()
    assert asked.status_code == 501, asked.content
    error = asked.json()["error"]
    assert error["code"] == "capability_unsupported"
    assert (error["details"]["capability"], error["details"]["instance"]) == ("terminate", "replay")
    assert not Approval.objects.exists() and mail.outbox == []
