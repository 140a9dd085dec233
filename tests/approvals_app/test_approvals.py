"""Approval requests: who is asked, how links travel (privately), expiry, execution exactly once, audit."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone

from approvals_app import approvals, delivery
from approvals_app.approvals import (
    ApprovalNotUsable,
    NoEligibleApprover,
    approval_consume,
    approval_request,
)
from approvals_app.decisions import approval_decide
from approvals_app.executions import execution_run
from approvals_app.models import Approval, ApprovalExecution, ApprovalLink, ApprovalSettings
from tess_site.accounts import services as accounts
from tess_site.audit.models import AuditEvent
from tess_site.errors import InvalidInput, TessError
from tess_site.leases import LeaseState, claim, sweep
from tess_site.scope import Role
from tests.approvals_app.approval_fixtures import ACTION, approver2, token_of, tokens_by_recipient
from tests.conftest import scope_of

pytestmark = pytest.mark.django_db


def _approve(cast: Any, token: str, capture: Any, user: Any = None, approve: bool = True, reason: str = "") -> Approval:
    with capture(execute=True):
        return approval_decide(scope_of(user or cast.approver, cast.acme), token=token, approve=approve, reason=reason)


def test_a_request_names_exact_action_target_parameters_requester_and_a_15_minute_expiry(mailed, request_touch):
    before = timezone.now()
    approval = request_touch(parameters={"mode": "gentle", "count": 2})
    assert (approval.action, approval.target_type, approval.target_id) == (ACTION, "document", "doc-1")
    assert approval.parameters == {"mode": "gentle", "count": 2}
    assert approval.requester == mailed.owner and approval.status == "pending"
    assert before + timedelta(minutes=15) <= approval.expires_at <= timezone.now() + timedelta(minutes=15)


def test_the_expiry_follows_the_setting(mailed, request_touch, settings):
    settings.TESS_APPROVAL_TTL_MINUTES = 3
    approval = request_touch()
    assert approval.expires_at - approval.created_at == timedelta(minutes=3)


def test_every_approver_but_the_requester_gets_one_link_and_only_its_hash_is_stored(mailed, request_touch):
    accounts.membership_grant(tenant=mailed.acme, user=mailed.owner, role=Role.APPROVER)
    approval = request_touch()
    links = list(approval.links.order_by("approver__username"))
    assert [link.approver.username for link in links] == ["approver", "approver2"]
    for link in links:
        token = token_of(link.approver)
        assert link.token_hash == hashlib.sha256(token.encode()).hexdigest()
        stored = json.dumps(list(ApprovalLink.objects.values()), default=str) + json.dumps(
            list(Approval.objects.values()), default=str
        )
        assert token not in stored


def test_the_requester_approves_their_own_request_only_where_the_tenant_allows_it(mailed, request_touch):
    accounts.membership_grant(tenant=mailed.acme, user=mailed.owner, role=Role.APPROVER)
    ApprovalSettings.objects.create(tenant=mailed.acme, allow_self_approval=True)
    approval = request_touch()
    assert set(approval.links.values_list("approver__username", flat=True)) == {"owner", "approver", "approver2"}


def test_a_request_nobody_may_decide_is_refused_and_nothing_is_created(cast, request_touch):
    from tess_site.accounts.models import Membership

    Membership.objects.filter(tenant=cast.acme, role=Role.APPROVER).delete()
    with pytest.raises(NoEligibleApprover):
        request_touch()
    assert not Approval.objects.exists() and not mail.outbox


def test_an_action_without_an_executor_cannot_be_requested(cast):
    with pytest.raises(InvalidInput):
        approval_request(
            scope_of(cast.owner, cast.acme),
            action="nobody.knows",
            target_type="x",
            target_id="1",
            parameters={},
            session_id=None,
        )
    assert not Approval.objects.exists()


def test_each_link_is_mailed_only_to_its_own_approver(mailed, request_touch):
    request_touch()
    sent = tokens_by_recipient()
    assert set(sent) == {"approver@example.test", "approver2@example.test"}  # not the requester, nor others
    first, second = token_of(mailed.approver), token_of(approver2())
    assert first != second
    assert first not in "".join(m.body for m in mail.outbox if m.to != ["approver@example.test"])
    assert second not in "".join(m.body for m in mail.outbox if m.to != ["approver2@example.test"])


def test_the_drawer_gets_the_link_only_for_its_own_approver(mailed, request_touch, monkeypatch):
    pushed: list[tuple[int, str, dict[str, Any]]] = []

    def record(*, tenant_id: int, user_id: int, kind: str, body: dict[str, Any]) -> None:
        pushed.append((user_id, kind, body))

    monkeypatch.setattr(delivery, "notify_user_on_commit", record)
    monkeypatch.setattr(approvals, "notify_user_on_commit", record)
    request_touch()
    token = token_of(mailed.approver)
    holders = {user_id for user_id, _, body in pushed if token in json.dumps(body)}
    assert holders == {mailed.approver.pk}
    assert any(user_id == mailed.owner.pk and kind == "approval" for user_id, kind, _ in pushed)


def test_private_deliverers_get_their_approvers_link_and_shared_notifiers_never_a_token(mailed, request_touch):
    private: list[tuple[str, str]] = []
    shared: list[dict[str, Any]] = []
    delivery.register_private_deliverer("test-dm", lambda a, approver, url: private.append((approver.username, url)))
    delivery.register_shared_notifier("test-channel", lambda a, body: shared.append(body))
    try:
        approval = request_touch()
    finally:
        delivery._private.pop("test-dm", None)
        delivery._shared.pop("test-channel", None)
    assert sorted(name for name, _ in private) == ["approver", "approver2"]
    assert all(token_of(mailed.approver) in url for name, url in private if name == "approver")
    assert len(shared) == 1 and shared[0]["id"] == str(approval.pk)
    every_token = [t for found in tokens_by_recipient().values() for t in found]
    assert every_token and not any(token in json.dumps(shared[0]) for token in every_token)
    assert "/approvals/" not in json.dumps(shared[0])


def test_approving_executes_the_action_exactly_once_and_records_the_result(
    mailed, request_touch, executed, django_capture_on_commit_callbacks
):
    approval = request_touch()
    decided = _approve(mailed, token_of(mailed.approver), django_capture_on_commit_callbacks)
    assert decided.status == "approved" and decided.decided_by == mailed.approver
    assert executed.calls == [str(approval.pk)]
    approval.refresh_from_db()
    assert approval.execution == "executed" and approval.result == {"touched": "doc-1"}
    assert approval.consumed_at is not None
    item = ApprovalExecution.objects.get(approval=approval)
    assert item.state == LeaseState.DONE
    assert execution_run(item_id=item.pk, worker="another") is False  # a second delivery of the task
    assert executed.calls == [str(approval.pk)]


def test_a_denial_needs_a_reason_and_executes_nothing(
    mailed, request_touch, executed, django_capture_on_commit_callbacks
):
    approval = request_touch()
    token = token_of(mailed.approver)
    with pytest.raises(InvalidInput):
        _approve(mailed, token, django_capture_on_commit_callbacks, approve=False, reason="  ")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    denied = _approve(mailed, token, django_capture_on_commit_callbacks, approve=False, reason="not during the demo")
    assert denied.status == "denied" and denied.decision_reason == "not during the demo"
    assert executed.calls == [] and not ApprovalExecution.objects.exists()


def test_an_approval_is_consumed_once_and_only_for_its_exact_action_and_target(
    mailed, request_touch, executed, django_capture_on_commit_callbacks
):
    approval = request_touch()
    executed.raise_error = InvalidInput("stop before the effect")  # leaves the approval approved and unused
    _approve(mailed, token_of(mailed.approver), django_capture_on_commit_callbacks)
    approval.refresh_from_db()
    assert approval.consumed_at is None and approval.execution == "failed"
    with pytest.raises(ApprovalNotUsable):
        approval_consume(approval_id=approval.pk, action=ACTION, target_type="document", target_id="doc-2")
    with pytest.raises(ApprovalNotUsable):
        approval_consume(approval_id=approval.pk, action="other.action", target_type="document", target_id="doc-1")
    approval_consume(approval_id=approval.pk, action=ACTION, target_type="document", target_id="doc-1")
    with pytest.raises(ApprovalNotUsable):
        approval_consume(approval_id=approval.pk, action=ACTION, target_type="document", target_id="doc-1")


def test_a_refused_execution_is_recorded_as_failed_and_not_retried(
    mailed, request_touch, executed, django_capture_on_commit_callbacks
):
    approval = request_touch()
    executed.raise_error = TessError("the target refused")
    _approve(mailed, token_of(mailed.approver), django_capture_on_commit_callbacks)
    approval.refresh_from_db()
    assert approval.execution == "failed" and approval.result == {"error": {"code": "error"}}
    assert approval.consumed_at is None  # the failed attempt rolled its consumption back
    assert ApprovalExecution.objects.get(approval=approval).state == LeaseState.DONE
    assert AuditEvent.objects.filter(action="approval.failed", outcome="failed").count() == 1


def test_a_dead_workers_execution_is_swept_back_and_finished_once(
    mailed, request_touch, executed, django_capture_on_commit_callbacks, monkeypatch
):
    from approvals_app import decisions

    approval = request_touch()
    monkeypatch.setattr(decisions, "queue_execution", _queue_without_running)
    _approve(mailed, token_of(mailed.approver), django_capture_on_commit_callbacks)
    item = ApprovalExecution.objects.get(approval=approval)
    dead = claim(ApprovalExecution, pk=item.pk, worker="dead-worker")  # claimed, then the worker died
    assert dead is not None and executed.calls == []
    ApprovalExecution.objects.filter(pk=item.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    woken: list[object] = []
    with django_capture_on_commit_callbacks(execute=True):
        assert sweep(ApprovalExecution, woken.append) == [item.pk]
    assert execution_run(item_id=item.pk, worker="live-worker") is True
    assert execution_run(item_id=item.pk, worker="late-worker") is False
    assert executed.calls == [str(approval.pk)]


def _queue_without_running(approval: Approval) -> ApprovalExecution:
    return ApprovalExecution.objects.create(approval=approval)


def test_every_step_is_audited_without_free_text(mailed, request_touch, executed, django_capture_on_commit_callbacks):
    from approvals_app.decisions import approval_link_viewed, link_for_token

    approval = request_touch(reason="a sentence someone typed")
    token = token_of(mailed.approver)
    approval_link_viewed(scope_of(mailed.approver, mailed.acme), link=link_for_token(token))
    _approve(mailed, token, django_capture_on_commit_callbacks)
    actions = list(AuditEvent.objects.filter(tenant=mailed.acme).order_by("seq").values_list("action", flat=True))
    assert actions == [
        "approval.proposed",
        "approval.link_issued",
        "approval.link_issued",
        "approval.viewed",
        "approval.approved",
        "approval.executed",
    ]
    dumped = json.dumps(list(AuditEvent.objects.values("metadata")))
    assert "sentence" not in dumped and token not in dumped
    assert str(approval.pk) in dumped


def test_approval_changes_reach_the_requester_over_ws_me(mailed, request_touch, executed, monkeypatch):
    pushed: list[tuple[int, str, dict[str, Any]]] = []
    monkeypatch.setattr(
        approvals, "notify_user_on_commit", lambda **kw: pushed.append((kw["user_id"], kw["kind"], kw["body"]))
    )
    approval = request_touch()
    assert (mailed.owner.pk, "approval", "pending") in [(u, k, b["status"]) for u, k, b in pushed]
    assert all(b["id"] == str(approval.pk) for _, _, b in pushed)


def test_a_transient_failure_is_retried_and_then_executes_once(
    mailed, request_touch, executed, django_capture_on_commit_callbacks
):
    from approvals_app.executions import execution_requeue_due, requeue_due_executions

    class Unreachable(TessError):
        code = "provider_unavailable"
        status_code = 503

    approval = request_touch()
    executed.raise_error = Unreachable()
    _approve(mailed, token_of(mailed.approver), django_capture_on_commit_callbacks)
    item = ApprovalExecution.objects.get(approval=approval)
    approval.refresh_from_db()
    assert (item.state, item.attempts, approval.execution) == (LeaseState.PENDING, 1, "queued")
    executed.raise_error = None
    assert execution_requeue_due() == 0  # not due yet: it waits out its backoff
    ApprovalExecution.objects.filter(pk=item.pk).update(available_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert requeue_due_executions.delay().get() == 1
    approval.refresh_from_db()
    assert approval.execution == "executed" and executed.calls == [str(approval.pk)]
    assert execution_requeue_due() == 0


def test_pinned_approval_references_resolve_only_for_those_who_may_read_the_approval(mailed, request_touch):
    from tess_site.refs import resolve

    approval = request_touch()
    ref = f"approval:{approval.pk}"
    assert resolve(scope_of(mailed.owner, mailed.acme), ref)
    assert resolve(scope_of(mailed.approver, mailed.acme), ref)
    assert not resolve(scope_of(mailed.teammate, mailed.acme), ref)
    assert not resolve(scope_of(mailed.outsider, mailed.globex), ref)
