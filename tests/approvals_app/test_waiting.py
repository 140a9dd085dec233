"""What waits on a person (``approvals_app.waiting``), sent first on every ``/ws/me/`` connect."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals_app.models import Approval
from approvals_app.waiting import waiting_on
from tests.conftest import scope_of

pytestmark = pytest.mark.django_db


def test_an_approver_finds_the_pending_requests_they_may_decide_and_nothing_else(mailed, request_touch, cast):
    pending = request_touch()
    lapsed = request_touch()
    Approval.objects.filter(pk=lapsed.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    snapshot = waiting_on(scope=scope_of(mailed.approver, cast.acme))

    assert [item["id"] for item in snapshot["approvals_to_decide"]] == [str(pending.pk)]
    assert snapshot["approvals_to_decide"][0]["status"] == "pending"
    assert "/approvals/" not in str(snapshot) and "token" not in str(snapshot)  # never a one-time link


def test_the_requester_finds_their_pending_requests(mailed, request_touch, cast):
    pending = request_touch()
    snapshot = waiting_on(scope=scope_of(pending.requester, cast.acme))
    assert [item["id"] for item in snapshot["approvals_requested"]] == [str(pending.pk)]


def test_nobody_else_sees_them(mailed, request_touch, cast):
    request_touch()
    for user, tenant in ((cast.teammate, cast.acme), (cast.outsider, cast.globex)):
        assert waiting_on(scope=scope_of(user, tenant)) == {
            "cards": [],
            "approvals_to_decide": [],
            "approvals_requested": [],
            "inbox": [],
        }
