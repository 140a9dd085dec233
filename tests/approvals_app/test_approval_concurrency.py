"""Concurrent decisions on PostgreSQL, each from its own thread and connection: exactly one lands."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from approvals_app.models import Approval, ApprovalExecution, ApprovalLink
from tess_site.audit.models import AuditEvent
from tests.approvals_app.approval_fixtures import approver2, token_of
from tests.conftest import csrf_token

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _client(user: Any) -> tuple[Client, str]:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client, csrf_token(client)  # type: ignore[arg-type]


def _race(posts: list[tuple[Client, str, dict[str, str]]]) -> list[int]:
    """Send every POST at once, each from its own thread (and so its own database connection)."""
    barrier = threading.Barrier(len(posts))
    statuses: list[int] = [0] * len(posts)
    errors: list[BaseException] = []

    def run(i: int, client: Client, path: str, data: dict[str, str]) -> None:
        try:
            barrier.wait(timeout=30)
            statuses[i] = client.post(path, data).status_code
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, *post)) for i, post in enumerate(posts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    return statuses


def test_twenty_concurrent_approvals_land_once_and_execute_once(mailed, request_touch, executed):
    approval = request_touch()
    token = token_of(mailed.approver)
    posts = []
    for _ in range(20):
        client, csrf = _client(mailed.approver)
        posts.append((client, f"/approvals/{token}/", {"decision": "approve", "csrfmiddlewaretoken": csrf}))
    statuses = _race(posts)
    assert sorted(statuses) == [200] + [409] * 19
    approval.refresh_from_db()
    assert (approval.status, approval.execution) == ("approved", "executed")
    assert executed.calls == [str(approval.pk)]
    assert ApprovalExecution.objects.filter(approval=approval).count() == 1
    assert AuditEvent.objects.filter(action="approval.approved").count() == 1
    assert AuditEvent.objects.filter(action="approval.executed").count() == 1


def test_racing_approvers_approve_and_deny_and_only_one_decision_stands(mailed, request_touch, executed):
    approval = request_touch()
    posts = []
    for i in range(20):
        user = mailed.approver if i % 2 else approver2()
        client, csrf = _client(user)
        data = {"decision": "approve" if i % 2 else "deny", "reason": "no", "csrfmiddlewaretoken": csrf}
        posts.append((client, f"/approvals/{token_of(user)}/", data))
    statuses = _race(posts)
    assert sorted(statuses) == [200] + [409] * 19
    approval.refresh_from_db()
    assert approval.status in ("approved", "denied")
    assert ApprovalLink.objects.filter(approval=approval, used_at__isnull=False).count() == 1
    assert len(executed.calls) == (1 if approval.status == "approved" else 0)
    decided = AuditEvent.objects.filter(action__in=["approval.approved", "approval.denied"]).count()
    assert decided == 1
    assert Approval.objects.filter(pk=approval.pk, decided_by__isnull=False).count() == 1
