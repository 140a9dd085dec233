"""The approval lifecycle under arbitrary interleavings, as a hypothesis state machine.

Requests are made through ``approval_request`` (links delivered by e-mail); everything a person does goes
through the one-time page over HTTP with a logged-in browser session and its CSRF token: opening a link,
approving, denying. Time passing is an expiry moved into the past; executing is workers running the
execution item. Invariants after every step: at most one decision and one execution per request, at most
one link used, the database agrees with the model; and every refusal has its status — someone else's link
403, a used link or a decided request 409, an expired one 410 — and changes nothing.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.core.cache import cache
from django.db import transaction
from django.test import TestCase
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from rest_framework.test import APIClient

from approvals_app.approvals import approval_request
from approvals_app.executions import execution_run
from approvals_app.models import Approval, ApprovalExecution, ApprovalLink
from tess_site.audit.models import AuditEvent
from tests.approvals_app.approval_fixtures import ACTION, Executed, approver2, tokens_by_recipient
from tests.conftest import Cast, csrf_token, scope_of

pytestmark = pytest.mark.django_db

CI_SETTINGS = settings(
    max_examples=int(os.environ.get("TESS_HYPOTHESIS_EXAMPLES", "12")),
    stateful_step_count=25,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

APPROVERS = ["approver", "approver2"]
PEOPLE = ["approver", "approver2", "owner"]
MINE = st.sampled_from([True, True, True, False])  # mostly the link's own approver; sometimes someone else


def holder(whose: str, mine: bool, stranger: str) -> str:
    """Who opens ``whose`` link: its approver, or another person (the other approver or the requester)."""
    if mine:
        return whose
    return stranger if stranger != whose else "owner"


@dataclass
class Request:
    approval_id: Any
    tokens: dict[str, str]  # approver's username -> their link's token
    status: str = "pending"
    expired: bool = False
    used: set[str] = field(default_factory=set)
    executed: bool = False


def machine_for(cast: Cast, executed: Executed) -> type[RuleBasedStateMachine]:
    people = {"approver": cast.approver, "approver2": approver2(), "owner": cast.owner}
    browsers: dict[str, tuple[APIClient, str]] = {}
    for name, user in people.items():
        client = APIClient(enforce_csrf_checks=True)
        client.force_login(user)
        browsers[name] = (client, csrf_token(client))

    class ApprovalMachine(RuleBasedStateMachine):
        requests = Bundle("requests")

        def __init__(self) -> None:
            super().__init__()
            self.savepoint = transaction.savepoint()
            self.count = 0
            self.made: list[Request] = []
            cache.clear()

        def teardown(self) -> None:
            transaction.savepoint_rollback(self.savepoint)
            executed.calls.clear()

        def expected_refusal(self, req: Request, who: str, whose: str) -> int | None:
            if who != whose:
                return 403
            if whose in req.used or req.status != "pending":
                return 409
            if req.expired:
                return 410
            return None

        @rule(target=requests)
        def request(self) -> Request:
            self.count += 1
            mail.outbox.clear()
            with TestCase.captureOnCommitCallbacks(execute=True):
                approval = approval_request(
                    scope_of(cast.owner, cast.acme),
                    action=ACTION,
                    target_type="document",
                    target_id=f"doc-{self.count}",
                    parameters={"n": self.count},
                    session_id=None,
                    reason="tidy up",
                )
            sent = tokens_by_recipient()
            tokens = {name: sent[people[name].email][0] for name in APPROVERS}
            req = Request(approval.pk, tokens)
            self.made.append(req)
            return req

        @rule(req=requests, whose=st.sampled_from(APPROVERS), mine=MINE, stranger=st.sampled_from(PEOPLE))
        def open_link(self, req: Request, whose: str, mine: bool, stranger: str) -> None:
            who = holder(whose, mine, stranger)
            client, _ = browsers[who]
            response = client.get(f"/approvals/{req.tokens[whose]}/")
            assert response.status_code == (self.expected_refusal(req, who, whose) or 200)

        @rule(
            req=requests,
            whose=st.sampled_from(APPROVERS),
            mine=MINE,
            stranger=st.sampled_from(PEOPLE),
            approve=st.booleans(),
        )
        def decide(self, req: Request, whose: str, mine: bool, stranger: str, approve: bool) -> None:
            who = holder(whose, mine, stranger)
            client, token = browsers[who]
            data = {"decision": "approve" if approve else "deny", "reason": "not now", "csrfmiddlewaretoken": token}
            response = client.post(f"/approvals/{req.tokens[whose]}/", data)
            refusal = self.expected_refusal(req, who, whose)
            assert response.status_code == (refusal or 200), (req, who, whose)
            if refusal is None:
                req.status = "approved" if approve else "denied"
                req.used.add(whose)

        @rule(req=requests)
        def time_passes(self, req: Request) -> None:
            Approval.objects.filter(pk=req.approval_id).update(expires_at=timezone.now() - timedelta(seconds=1))
            req.expired = True

        @rule(req=requests, workers=st.integers(1, 3))
        def workers_run_the_execution(self, req: Request, workers: int) -> None:
            item = ApprovalExecution.objects.filter(approval_id=req.approval_id).first()
            assert (item is not None) == (req.status == "approved")
            if item is None:
                return
            ran = [execution_run(item_id=item.pk, worker=f"worker-{n}") for n in range(workers)]
            assert ran.count(True) == (0 if req.executed else 1)
            req.executed = True

        @invariant()
        def the_database_agrees_with_the_model(self) -> None:
            rows = {a.pk: a for a in Approval.objects.filter(action=ACTION)}
            assert set(rows) == {req.approval_id for req in self.made}
            for req in self.made:
                row = rows[req.approval_id]
                assert row.status == req.status
                assert (row.execution == "executed") == req.executed
                used = set(
                    ApprovalLink.objects.filter(approval_id=req.approval_id, used_at__isnull=False).values_list(
                        "approver__username", flat=True
                    )
                )
                assert used == req.used

        @invariant()
        def at_most_one_decision_execution_and_used_link(self) -> None:
            decisions = Counter(
                AuditEvent.objects.filter(action__in=["approval.approved", "approval.denied"]).values_list(
                    "metadata__approval_id", flat=True
                )
            )
            assert all(n == 1 for n in decisions.values()), decisions
            assert all(n == 1 for n in Counter(executed.calls).values()), executed.calls
            used = Counter(ApprovalLink.objects.filter(used_at__isnull=False).values_list("approval_id", flat=True))
            assert all(n == 1 for n in used.values()), used
            items = Counter(ApprovalExecution.objects.values_list("approval_id", flat=True))
            assert all(n == 1 for n in items.values())

    return ApprovalMachine


def test_the_approval_lifecycle_holds_under_any_interleaving(mailed, executed, settings):
    settings.TESS_APPROVAL_RATE = "100000/min"
    run_state_machine_as_test(machine_for(mailed, executed), settings=CI_SETTINGS)
