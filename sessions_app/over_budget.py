"""Input over a budget: a turn or raw input that a ``require_approval`` budget stopped, held in an approval
request (``session.over_budget``) and run once an approver approves it.

The approval's parameters are exactly what is held: ``kind`` (``turn`` or ``message``), the ``text`` (and
``keys`` for a terminal's keystrokes) and the budget. Executed once (``approval_consume``): a message is
queued for delivery like any raw input; a turn is queued to run (``RUN_APPROVED_TURN``) after the execution
commits, since a model call may not run inside it. Its answer reaches the session's stream.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from approvals_app.approvals import ApprovalNotUsable, approval_consume, approval_request
from approvals_app.briefs import ActionBrief
from approvals_app.models import Approval
from tess_site.audit.services import record_audit
from tess_site.errors import NotFound
from tess_site.scope import Scope
from tess_site.terminal_text import plain_lines

from . import selectors
from .budgets import figure
from .inbox_input import input_queue
from .models import Budget, Session, SessionStatus
from .terminate import SessionNotRunning
from .wakeups import RUN_APPROVED_TURN, wake_on_commit

ACTION = "session.over_budget"
KINDS = ("turn", "message")


def over_budget_request(
    *, scope: Scope, session: Session, budget: Budget, kind: str, text: str, keys: bool = False
) -> Approval:
    """Hold ``text`` (a turn or raw input of the scope's actor) in an approval request; nothing is sent."""
    assert kind in KINDS
    with transaction.atomic():
        approval = approval_request(
            scope.for_session(str(session.pk)),
            action=ACTION,
            target_type="session",
            target_id=str(session.pk),
            parameters={"kind": kind, "text": text, "keys": keys, "budget_id": budget.pk},
            session_id=str(session.pk),
            reason=f"Budget {budget.name} has reached its limit of {figure(budget.limit)} this {budget.period}.",
        )
        record_audit(
            scope,
            action=ACTION,
            target_type="session",
            target_id=str(session.pk),
            outcome="approval_requested",
            metadata={"approval_id": str(approval.pk), "budget_id": budget.pk, "kind": kind, "chars": len(text)},
        )
    return approval


def execute_over_budget(scope: Scope, approval: Approval) -> dict[str, Any]:
    """The ``session.over_budget`` executor (inside approvals_app's execution transaction)."""
    parameters = approval.parameters if isinstance(approval.parameters, dict) else {}
    if approval.target_type != "session" or parameters.get("kind") not in KINDS:
        raise ApprovalNotUsable(details={"approval_id": str(approval.pk)})
    session_pk = _uuid(approval.target_id)
    session = (
        Session.objects.select_for_update(of=("self",)).filter(pk=session_pk, tenant_id=approval.tenant_id).first()
        if session_pk is not None
        else None
    )
    if session is None:
        raise NotFound("The session no longer exists.")
    approval_consume(approval_id=approval.pk, action=ACTION, target_type="session", target_id=str(session.pk))
    if session.status != SessionStatus.RUNNING:
        raise SessionNotRunning(details={"session_id": str(session.pk), "status": session.status})
    if parameters["kind"] == "turn":
        wake_on_commit(RUN_APPROVED_TURN, str(approval.pk))
        return {"session_id": str(session.pk), "turn": "queued"}
    item = input_queue(
        scope,
        session,
        created_by_id=approval.requester_id,
        channel=approval.channel,
        correlation_id=approval.correlation_id,
        text=str(parameters["text"]),
        keys=bool(parameters.get("keys")),
        metadata={"approval_id": str(approval.pk)},
    )
    return {"session_id": str(session.pk), "inbox_id": item.pk}


def describe_over_budget(approval: Approval) -> ActionBrief | None:
    session = selectors.session_for_approval(
        session_id=approval.session_id or approval.target_id, tenant_id=approval.tenant_id
    )
    parameters = approval.parameters if isinstance(approval.parameters, dict) else {}
    if session is None or parameters.get("kind") not in KINDS:
        return None
    budget = Budget.objects.filter(pk=int(parameters.get("budget_id") or 0), tenant_id=approval.tenant_id).first()
    what = "a turn to Tess (it asks the model)" if parameters["kind"] == "turn" else "input to the agent"
    sentence = (
        f"Let {approval.requester.get_username()} send {what} in the session "
        f"\u201c{session.title or session.runtime_id}\u201d although budget "
        f"{budget.name if budget else parameters.get('budget_id')} has reached its limit"
    )
    held = plain_lines(str(parameters.get("text", "")), last=40)
    return ActionBrief(sentence=sentence, output_lines=held, output_label="What will be sent once approved")


def _uuid(value: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None
