"""Terminating a session: asked for through an approval, executed once an approver approved it.

``session_terminate`` (services) creates the approval; ``execute_terminate`` is the executor registered
for ``session.terminate`` with approvals_app, which runs it in a leased task after approval; and
``post_approval_event`` is the observer that puts every change of a session's approvals into its stream.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals_app.approvals import ApprovalNotUsable, approval_consume, approval_request, display_status
from approvals_app.models import Approval
from providers_app.contract import CapabilityUnsupported, Operation, RuntimeNotFound
from providers_app.registry import get_provider
from tess_site.audit.services import record_audit
from tess_site.errors import Conflict, InvalidInput, NotFound
from tess_site.scope import Scope

from . import events, stream
from .inbox_source import announce_waiting
from .journal import event_append
from .lifecycle import capture_for_user_on_commit, capture_on_commit, ended_text
from .models import AgentState, Session, SessionStatus
from .scopes import system_scope

ACTION = "session.terminate"


class SessionNotRunning(Conflict):
    code = "session_not_running"
    default_message = "The session is not running; there is nothing to terminate."


def terminate_parameters(session: Session) -> dict[str, Any]:
    """Exactly what an approval of a terminate names: the provider instance and the runtime id."""
    return {"provider": session.provider_instance, "runtime_id": session.runtime_id}


def require_terminate_capability(session: Session) -> None:
    """Fail closed before anyone is asked: the session's provider instance must offer ``terminate``.

    An unconfigured instance offers nothing. The error names the capability and the instance, so the
    requester learns why without an approver having been bothered (seed 001: never emulate silently).
    """
    instance = session.provider_instance
    try:
        provider = get_provider(instance)
    except RuntimeNotFound:
        provider = None
    if provider is None or not provider.capabilities().supports(Operation.TERMINATE):
        kind = provider.kind if provider is not None else None
        raise CapabilityUnsupported(
            f"The provider instance {instance!r} does not support {Operation.TERMINATE.value}.",
            details={"capability": Operation.TERMINATE.value, "instance": instance, "kind": kind},
        )


def bind_terminate_parameters(scope: Scope, target_type: str, target_id: str, given: dict[str, Any]) -> dict[str, Any]:
    """What an approval of terminating ``target_id`` pins, whoever asks for it (REST or the gateway).

    The caller may name no parameters (they are filled in from the session) or exactly these.
    """
    session_pk = _uuid(target_id)
    session = (
        Session.objects.filter(pk=session_pk, tenant=scope.tenant).first()
        if target_type == "session" and session_pk is not None
        else None
    )
    if session is None:
        raise NotFound("No such session.")
    exact = terminate_parameters(session)
    if given and given != exact:
        raise InvalidInput("The parameters do not name this session's runtime.", details={"field": "parameters"})
    require_terminate_capability(session)
    return exact


def terminate_request(*, scope: Scope, session: Session, reason: str = "") -> Approval:
    """A pending approval to terminate ``session``; the actor's own pending one is reused, not duplicated."""
    if session.status != SessionStatus.RUNNING:
        raise SessionNotRunning(details={"session_id": str(session.pk), "status": session.status})
    assert scope.actor is not None
    require_terminate_capability(session)
    existing = Approval.objects.filter(
        tenant=scope.tenant,
        requester=scope.actor,
        action=ACTION,
        target_type="session",
        target_id=str(session.pk),
        status=Approval.Status.PENDING,
        expires_at__gt=timezone.now(),
    ).first()
    if existing is not None:
        return existing
    with transaction.atomic():
        approval = approval_request(
            scope.for_session(str(session.pk)),
            action=ACTION,
            target_type="session",
            target_id=str(session.pk),
            parameters=terminate_parameters(session),
            session_id=str(session.pk),
            reason=reason,
        )
        record_audit(
            scope,
            action=ACTION,
            target_type="session",
            target_id=str(session.pk),
            outcome="approval_requested",
            metadata={"approval_id": str(approval.pk)},
        )
    return approval


def execute_terminate(scope: Scope, approval: Approval) -> dict[str, Any]:
    """The ``session.terminate`` executor: runs inside the execution transaction of approvals_app.

    Verifies that the approval is an approved, unused approval of exactly this action for exactly this
    session (provider instance and runtime id unchanged), consumes it, then kills the runtime through the
    provider with the approval reference, and records ``terminated`` in the session and its stream.
    """
    session_pk = _uuid(approval.target_id)
    if (
        approval.action != ACTION
        or approval.target_type != "session"
        or approval.session_id != approval.target_id
        or session_pk is None
    ):
        raise ApprovalNotUsable(details={"approval_id": str(approval.pk)})
    session = (
        Session.objects.select_for_update(of=("self",))
        .select_related("tenant")
        .filter(pk=session_pk, tenant_id=approval.tenant_id)
        .first()
    )
    if session is None:
        raise NotFound("The session no longer exists.")
    if approval.parameters != terminate_parameters(session):
        raise ApprovalNotUsable(details={"approval_id": str(approval.pk)})
    approval_consume(approval_id=approval.pk, action=ACTION, target_type="session", target_id=str(session.pk))
    if session.status != SessionStatus.RUNNING:
        raise SessionNotRunning(details={"session_id": str(session.pk), "status": session.status})
    get_provider(session.provider_instance).terminate(
        session.runtime_ref, f"approval:{approval.pk}", system_scope(session, scope.correlation_id)
    )
    now = timezone.now()
    Session.objects.filter(pk=session.pk).update(
        status=SessionStatus.TERMINATED,
        updated_at=now,
        agent_state=AgentState.ENDED,
        agent_state_since=now,
        agent_state_seen="",
        agent_state_seen_since=None,
    )
    event_append(
        session_id=session.pk,
        kind=stream.EventKind.STATUS,
        body=stream.status_body(status="terminated", agent_state=AgentState.ENDED, since=now),
    )
    capture_on_commit(session_id=session.pk, source="session.ended", text=ended_text(session, "terminated"))
    if session.agent_state == AgentState.WAITING_FOR_INPUT:
        announce_waiting(session, waiting=False)
    events.board_changed_on_commit(tenant_id=session.tenant_id, session_id=session.pk)
    record_audit(
        scope,
        action=ACTION,
        target_type="session",
        target_id=str(session.pk),
        outcome="executed",
        metadata={"approval_id": str(approval.pk)},
    )
    return {"session_id": str(session.pk), "status": SessionStatus.TERMINATED.value}


def _uuid(value: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def post_approval_event(approval: Approval) -> None:
    """Observer: append an ``approval`` event (id, status) to the approval's session stream, if it has one;
    once it has executed (or failed), capture it in operational memory, whatever the action."""
    session_id = _uuid(approval.session_id) if approval.session_id else None
    if session_id is not None and not Session.objects.filter(pk=session_id, tenant_id=approval.tenant_id).exists():
        session_id = None
    done = (Approval.Execution.EXECUTED, Approval.Execution.FAILED)
    status = str(approval.execution) if approval.execution in done else display_status(approval)
    if session_id is not None:
        event_append(
            session_id=session_id,
            kind=stream.EventKind.APPROVAL,
            body=stream.approval_body(id=str(approval.pk), status=status),
        )
    if approval.execution in done:
        _capture_executed(approval, session_id, status)


def _capture_executed(approval: Approval, session_id: uuid.UUID | None, status: str) -> None:
    """The ``approval.executed`` record: in the session the approval was asked from; else in the session the
    execution started (a bootstrap); else (a GitOps write asked outside any session) in the requester's
    namespace of this approval."""
    text = f"Approval {approval.pk} of {approval.action} on {approval.target_type} {approval.target_id}: {status}."
    if session_id is None:
        result = approval.result if isinstance(approval.result, dict) else {}
        started = _uuid(str(result.get("session_id", ""))) if result.get("session_id") else None
        if started is not None and Session.objects.filter(pk=started, tenant_id=approval.tenant_id).exists():
            session_id = started
    if session_id is not None:
        capture_on_commit(session_id=session_id, source="approval.executed", text=text)
    else:
        capture_for_user_on_commit(
            tenant_id=approval.tenant_id,
            user_id=approval.requester_id,
            session_key=f"approval:{approval.pk}",
            source="approval.executed",
            text=text,
        )
