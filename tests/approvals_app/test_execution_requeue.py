"""An approved execution whose wake-up was lost (the broker was down at commit) is found in the database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from approvals_app.decisions import approval_decide
from approvals_app.executions import execution_requeue_due
from approvals_app.models import ApprovalExecution
from tess_site.leases import LeaseState
from tests.approvals_app.approval_fixtures import token_of
from tests.conftest import scope_of

pytestmark = pytest.mark.django_db


def test_a_never_attempted_execution_is_woken_a_lease_after_it_was_due(
    mailed, request_touch, executed, django_capture_on_commit_callbacks
):
    approval = request_touch()
    with django_capture_on_commit_callbacks(execute=False):  # the wake-up never reaches a worker
        approval_decide(scope_of(mailed.approver, mailed.acme), token=token_of(mailed.approver), approve=True)
    item = ApprovalExecution.objects.get(approval=approval)
    assert (item.state, item.attempts) == (LeaseState.PENDING, 0)
    assert execution_requeue_due() == 0  # just queued: its own wake-up may still be on its way

    lost = timezone.now() - timedelta(seconds=settings.TESS_LEASE_SECONDS + 1)
    ApprovalExecution.objects.filter(pk=item.pk).update(available_at=lost)
    with django_capture_on_commit_callbacks(execute=True):
        assert execution_requeue_due() == 1
    approval.refresh_from_db()
    assert approval.execution == "executed" and executed.calls == [str(approval.pk)]
    assert execution_requeue_due() == 0
