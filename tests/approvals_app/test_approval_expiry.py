"""Expiry as a recorded step: a request left pending past its expiry is written ``expired`` by the periodic
sweep, audited in the tenant's chain and announced like a decision; its links keep answering 410."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from approvals_app import approvals
from approvals_app.approvals import approvals_expire_lapsed
from approvals_app.decisions import approval_decide
from approvals_app.models import Approval, ApprovalExecution
from approvals_app.tasks import expire_lapsed_approvals
from tess_site.audit.models import AuditEvent
from tess_site.errors import TessError
from tests.approvals_app.approval_fixtures import approver2, token_of, tokens_by_recipient
from tests.conftest import csrf_token, scope_of

pytestmark = pytest.mark.django_db


def lapse(approval: Approval, seconds: int = 1) -> None:
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=seconds))


@pytest.fixture
def pushes(monkeypatch: Any) -> list[tuple[int, str, dict[str, Any]]]:
    """What would reach people's drawers (``/ws/me/``), instead of the channel layer."""
    sent: list[tuple[int, str, dict[str, Any]]] = []
    monkeypatch.setattr(
        approvals,
        "notify_user_on_commit",
        lambda *, tenant_id, user_id, kind, body: sent.append((user_id, kind, body)),
    )
    return sent


def test_a_lapsed_request_is_written_expired_audited_and_announced(mailed, request_touch, pushes):
    approval = request_touch()
    lapse(approval)
    assert approvals_expire_lapsed() == 1
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_at) == ("expired", None, None)
    entry = AuditEvent.objects.get(action="approval.expired")
    assert (entry.tenant_id, entry.actor_id, entry.channel, entry.outcome) == (
        mailed.acme.pk,
        None,
        "system",
        "expired",
    )
    assert (entry.target_type, entry.target_id) == ("document", "doc-1")
    assert entry.correlation_id == approval.correlation_id  # the same thread as the request in the audit feed
    assert entry.metadata["approval_id"] == str(approval.pk)
    told = {user_id for user_id, kind, body in pushes if kind == "approval" and body["status"] == "expired"}
    assert told == {mailed.owner.pk, mailed.approver.pk, approver2().pk}
    assert not ApprovalExecution.objects.exists()


def test_only_lapsed_pending_requests_are_written_and_only_once(mailed, request_touch, pushes):
    fresh = request_touch(target_id="doc-fresh")
    decided = request_touch(target_id="doc-decided")
    lapsed = request_touch(target_id="doc-lapsed")
    approval_decide(
        scope_of(mailed.approver, mailed.acme), token=_token(decided, mailed.approver), approve=False, reason="no"
    )
    lapse(decided)
    lapse(lapsed)
    assert approvals_expire_lapsed() == 1
    assert approvals_expire_lapsed() == 0  # a second sweep finds nothing more to write
    statuses = dict(Approval.objects.values_list("target_id", "status"))
    assert statuses == {"doc-fresh": "pending", "doc-decided": "denied", "doc-lapsed": "expired"}
    assert AuditEvent.objects.filter(action="approval.expired").count() == 1
    assert Approval.objects.get(pk=fresh.pk).status == "pending"


def _token(approval: Approval, approver: Any) -> str:
    """``approver``'s token for ``approval``: each request mails each approver one link."""
    mine = [
        token
        for token in tokens_by_recipient().get(approver.email, [])
        if approval.links.filter(approver=approver, token_hash=approvals.token_hash(token)).exists()
    ]
    assert len(mine) == 1, mine
    return mine[0]


def test_a_written_expiry_still_answers_410_on_the_link_and_changes_nothing(
    mailed, request_touch, browser_as, django_capture_on_commit_callbacks
):
    approval = request_touch()
    lapse(approval)
    approvals_expire_lapsed()
    client, token = browser_as(mailed.approver), token_of(mailed.approver)
    shown = client.get(f"/approvals/{token}/")
    assert shown.status_code == 410 and b'data-error-code="approval_expired"' in shown.content
    data = {"decision": "approve", "reason": "", "csrfmiddlewaretoken": csrf_token(client)}
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/approvals/{token}/", data).status_code == 410
    with pytest.raises(TessError) as refused:
        approval_decide(scope_of(mailed.approver, mailed.acme), token=token, approve=True)
    assert refused.value.code == "approval_expired"
    approval.refresh_from_db()
    assert approval.status == "expired" and not approval.links.filter(used_at__isnull=False).exists()
    assert not ApprovalExecution.objects.exists()


def test_a_decision_that_won_before_the_sweep_is_kept(mailed, request_touch, django_capture_on_commit_callbacks):
    approval = request_touch()
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(scope_of(mailed.approver, mailed.acme), token=token_of(mailed.approver), approve=True)
    lapse(approval)  # its expiry passes after the decision: nothing to write
    assert approvals_expire_lapsed() == 0
    approval.refresh_from_db()
    assert approval.status == "approved"
    assert not AuditEvent.objects.filter(action="approval.expired").exists()


def test_the_periodic_task_runs_the_sweep_and_beat_schedules_it(mailed, request_touch, settings):
    approval = request_touch()
    lapse(approval)
    assert expire_lapsed_approvals.delay().get() == 1
    schedule = settings.CELERY_BEAT_SCHEDULE["approvals-expire-lapsed"]
    assert schedule["task"] == "approvals_app.tasks.expire_lapsed_approvals"
    assert schedule["schedule"] == float(settings.TESS_SWEEP_INTERVAL_SECONDS)
