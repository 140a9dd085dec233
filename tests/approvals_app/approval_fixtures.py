"""Fixtures for the approval tests: an executor for a harmless test action, e-mail addresses, links."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.core import mail

from approvals_app import approvals
from approvals_app.approvals import approval_consume, approval_request, register_action_executor
from approvals_app.models import Approval
from tess_site.accounts import services as accounts
from tess_site.scope import Role, Scope
from tests.conftest import Cast, scope_of

ACTION = "test.touch"
LINK_RE = re.compile(r"/approvals/([A-Za-z0-9_-]{20,})/")


@dataclass
class Executed:
    """Every execution of the test action, and what the next one should do."""

    calls: list[str] = field(default_factory=list)
    raise_error: Exception | None = None


@pytest.fixture
def executed() -> Iterator[Executed]:
    record = Executed()

    def execute(scope: Scope, approval: Approval) -> dict[str, Any]:
        approval_consume(
            approval_id=approval.pk, action=ACTION, target_type=approval.target_type, target_id=approval.target_id
        )
        if record.raise_error is not None:
            raise record.raise_error
        record.calls.append(str(approval.pk))
        return {"touched": approval.target_id}

    register_action_executor(ACTION, execute)
    try:
        yield record
    finally:
        approvals._executors.pop(ACTION, None)


@pytest.fixture
def mailed(cast: Cast) -> Cast:
    """Give the cast e-mail addresses and a second approver, ``approver2``."""
    for user in (cast.owner, cast.teammate, cast.approver, cast.auditor, cast.admin_user, cast.outsider):
        user.email = f"{user.username}@example.test"
        user.save(update_fields=["email"])
    second, _ = accounts.user_ensure(username="approver2", password="approver2-pass-1234")
    second.email = "approver2@example.test"
    second.save(update_fields=["email"])
    accounts.membership_grant(tenant=cast.acme, user=second, role=Role.APPROVER)
    return cast


@pytest.fixture
def request_touch(cast: Cast, executed: Executed, django_capture_on_commit_callbacks: Any) -> Callable[..., Approval]:
    """Ask, as the owner (or ``user``), for approval of the test action; links are delivered (on commit)."""

    def make(user: Any = None, target_id: str = "doc-1", **fields: Any) -> Approval:
        fields.setdefault("parameters", {"mode": "gentle"})
        fields.setdefault("session_id", None)
        fields.setdefault("reason", "tidy up")
        with django_capture_on_commit_callbacks(execute=True):
            return approval_request(
                scope_of(user or cast.owner, cast.acme),
                action=ACTION,
                target_type="document",
                target_id=target_id,
                **fields,
            )

    return make


def approver2() -> Any:
    from django.contrib.auth.models import User

    return User.objects.get(username="approver2")


def tokens_by_recipient() -> dict[str, list[str]]:
    """Every approval token sent by e-mail so far, keyed by recipient address."""
    found: dict[str, list[str]] = {}
    for message in mail.outbox:
        for to in message.to:
            found.setdefault(to, []).extend(LINK_RE.findall(str(message.body)))
    return found


def token_of(user: Any) -> str:
    tokens = tokens_by_recipient().get(user.email, [])
    assert len(tokens) == 1, tokens
    return tokens[0]
