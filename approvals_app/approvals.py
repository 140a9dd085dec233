"""Approval requests: the human gate in front of destructive, privileged or externally visible actions.

A higher app asks for an approval with ``approval_request`` (exact action, target and parameters) and
registers, in its ``AppConfig.ready()``, the executor that performs the action once an approver has
decided (``register_action_executor``) and, if it wants to hear about changes, an observer
(``register_approval_observer``). approvals_app never imports the apps that own the actions.

Every eligible approver gets a one-time link (``approvals_app.delivery``), only privately. The decision is a
conditional UPDATE from ``pending`` on the link and on the request, so however many clicks race exactly
one decision lands (``approvals_app.decisions``); an approved request queues one leased execution item
(``approvals_app.executions``).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework import status

from tess_site.accounts.models import Membership
from tess_site.audit.services import record_audit
from tess_site.errors import Conflict, Forbidden, InvalidInput, NotFound, TessError
from tess_site.scope import Channel, Role, Scope

from .delivery import deliver_links_on_commit
from .events import notify_user_on_commit
from .inbox_items import approval_item
from .models import Approval, ApprovalExecution, ApprovalLink, ApprovalSettings
from .notifications import inbox_entered_on_commit, inbox_left_on_commit

if TYPE_CHECKING:
    from django.contrib.auth.models import User

_ACTION = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
_TARGET_TYPE = re.compile(r"^[a-z][a-z0-9_.]{0,63}$")
REASON_MAX = 500


# --- typed errors ----------------------------------------------------------------------------------------


class NoEligibleApprover(Conflict):
    code = "no_eligible_approver"
    default_message = "Nobody in this tenant may approve this request; ask an admin to name an approver."


class ApprovalLinkUnknown(NotFound):
    code = "approval_link_unknown"
    default_message = "This approval link does not exist."


class ApprovalLinkNotYours(Forbidden):
    code = "approval_link_not_yours"
    default_message = "This approval link was issued to someone else; nothing was done."


class ApprovalAlreadyDecided(Conflict):
    code = "approval_already_decided"
    default_message = "This approval was already decided or this link was already used; nothing was done."


class ApprovalExpired(TessError):
    code = "approval_expired"
    status_code = status.HTTP_410_GONE
    default_message = "This approval request has expired; nothing was done. Ask for a new one."


class ApprovalNotUsable(Conflict):
    code = "approval_not_usable"
    default_message = "The approval is not an unused approval of exactly this action and target."


# --- registries ------------------------------------------------------------------------------------------


class ActionExecutor(Protocol):
    def __call__(self, scope: Scope, approval: Approval) -> dict[str, Any]:
        """Perform the approved action, inside the execution transaction, and return its result.

        Call ``approval_consume`` first (it verifies the approval is approved, unused and for exactly this
        action and target, and marks it used). The result is stored and audited-by-reference: ids, codes
        and counts only. Raise a ``TessError`` to refuse (recorded as ``failed``, not retried); any other
        exception is retried with the lease until the item runs out of attempts.
        """


ApprovalObserver = Callable[[Approval], None]
# (scope, target_type, target_id, parameters as asked) -> the exact parameters to approve; raises TessError.
ParameterBinder = Callable[[Scope, str, str, dict[str, Any]], dict[str, Any]]

_executors: dict[str, ActionExecutor] = {}
_binders: dict[str, ParameterBinder] = {}
_observers: list[ApprovalObserver] = []


def register_action_executor(
    action: str, executor: ActionExecutor, *, bind_parameters: ParameterBinder | None = None
) -> None:
    """Name the callable that executes ``action`` once approved. Called from the owning app's ``ready()``.

    ``bind_parameters``, if given, decides what "exactly this" means for the action: ``approval_request``
    passes it the target and the parameters the caller named, and stores what it returns (for a terminate,
    the runtime the session is bound to right now), or refuses the request when it raises.
    """
    if not _ACTION.match(action) or len(action) > 64:
        raise ValueError(f"action {action!r} is not a dotted identifier such as 'session.terminate'")
    _executors[action] = executor
    if bind_parameters is not None:
        _binders[action] = bind_parameters
    else:
        _binders.pop(action, None)


def action_executor(action: str) -> ActionExecutor | None:
    return _executors.get(action)


def register_approval_observer(observer: ApprovalObserver) -> None:
    """Call ``observer(approval)`` inside the transaction of every change of an approval.

    Used by the app owning the approval's session to append ``approval`` events to the stream, so the
    event and the change commit together. An observer must not raise for approvals it does not concern.
    """
    if observer not in _observers:
        _observers.append(observer)


def _observe(approval: Approval) -> None:
    for observer in list(_observers):
        observer(approval)


# --- tokens ----------------------------------------------------------------------------------------------


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


def ttl() -> timedelta:
    return timedelta(minutes=int(getattr(settings, "TESS_APPROVAL_TTL_MINUTES", 15)))


def display_status(approval: Approval, now: Any = None) -> str:
    """The status a person sees: a pending request past its expiry reads ``expired``."""
    moment = now or timezone.now()
    if approval.status == Approval.Status.PENDING and approval.expires_at <= moment:
        return Approval.Status.EXPIRED.value
    return str(approval.status)


def approval_body(approval: Approval) -> dict[str, Any]:
    """What ``/ws/me/``, observers and notices say about an approval: ids and statuses only."""
    return {
        "id": str(approval.id),
        "status": display_status(approval),
        "execution": str(approval.execution),
        "action": approval.action,
        "target_type": approval.target_type,
        "target_id": approval.target_id,
        "session_id": approval.session_id,
    }


# --- requesting ------------------------------------------------------------------------------------------


def self_approval_allowed(tenant_id: int) -> bool:
    row = ApprovalSettings.objects.filter(tenant_id=tenant_id).first()
    return bool(row and row.allow_self_approval)


def eligible_approvers(*, tenant_id: int, requester_id: int) -> list[User]:
    """The tenant's approvers (active users), without the requester unless the tenant allows self-approval."""
    from django.contrib.auth import get_user_model

    user_ids = Membership.objects.filter(tenant_id=tenant_id, role=Role.APPROVER.value).values("user_id")
    users = get_user_model().objects.filter(pk__in=user_ids, is_active=True).order_by("pk")
    if not self_approval_allowed(tenant_id):
        users = users.exclude(pk=requester_id)
    return list(users)


def _check_request(action: str, target_type: str, target_id: str, parameters: dict[str, Any], reason: str) -> None:
    if not _ACTION.match(action) or len(action) > 64:
        raise InvalidInput("The action is not a known action name.", details={"field": "action"})
    if action not in _executors:
        raise InvalidInput("No executor is registered for this action.", details={"action": action})
    if not _TARGET_TYPE.match(target_type) or not target_id or len(target_id) > 64:
        raise InvalidInput("The target is not an exact reference.", details={"field": "target"})
    if not isinstance(parameters, dict):
        raise InvalidInput("Parameters must be an object.", details={"field": "parameters"})
    if len(reason) > REASON_MAX:
        raise InvalidInput(f"The reason is longer than {REASON_MAX} characters.", details={"field": "reason"})


def approval_request(
    scope: Scope,
    *,
    action: str,
    target_type: str,
    target_id: str,
    parameters: dict[str, Any],
    session_id: str | None,
    reason: str = "",
) -> Approval:
    """Propose ``action`` on ``target_type:target_id`` with ``parameters`` for the scope's actor.

    Creates the pending request with its expiry (``TESS_APPROVAL_TTL_MINUTES``), one one-time link per
    eligible approver (delivered privately after commit), audits ``proposed`` and ``link_issued``, and
    tells the requester's and the approvers' ``/ws/me/``. Raises ``no_eligible_approver`` if nobody may
    decide it (nothing is created then).
    """

    if scope.actor is None:
        raise InvalidInput("system scopes cannot request approvals")
    _check_request(action, target_type, target_id, parameters, reason)
    binder = _binders.get(action)
    if binder is not None:
        parameters = binder(scope, target_type, target_id, dict(parameters))
    approvers = eligible_approvers(tenant_id=scope.tenant.pk, requester_id=scope.actor.pk)
    if not approvers:
        raise NoEligibleApprover(details={"action": action})
    now = timezone.now()
    tokens: list[tuple[User, str]] = []
    with transaction.atomic():
        approval = Approval.objects.create(
            tenant=scope.tenant,
            requester=scope.actor,
            action=action,
            target_type=target_type,
            target_id=target_id,
            parameters=parameters,
            session_id=session_id,
            reason=reason,
            channel=scope.channel.value,
            correlation_id=scope.correlation_id,
            created_at=now,
            expires_at=now + ttl(),
        )
        meta = {"approval_id": str(approval.id), "session_id": session_id, "approvers": len(approvers)}
        record_audit(
            scope, action="approval.proposed", target_type=target_type, target_id=target_id, outcome="ok", metadata=meta
        )
        for approver in approvers:
            token = new_token()
            ApprovalLink.objects.create(approval=approval, approver=approver, token_hash=token_hash(token))
            tokens.append((approver, token))
            record_audit(
                scope,
                action="approval.link_issued",
                target_type="approval",
                target_id=str(approval.id),
                outcome="ok",
                metadata={"approver_id": approver.pk},
            )
        deliver_links_on_commit(approval, tokens)
        _notify(approval, extra_user_ids=[])
        _inbox_entered(approval, [approver.pk for approver in approvers])
        _observe(approval)
    return approval


def _inbox_entered(approval: Approval, approver_ids: list[int]) -> None:
    """The request enters its approvers' inboxes (with a notice) and its requester's (live only: they asked)."""
    for user_id in approver_ids:
        inbox_entered_on_commit(
            tenant_id=approval.tenant_id,
            user_id=user_id,
            item=approval_item(approval, kind="approval_to_decide"),
        )
    inbox_entered_on_commit(
        tenant_id=approval.tenant_id,
        user_id=approval.requester_id,
        item=approval_item(approval, kind="approval_requested"),
        notify=False,
    )


def _notify(approval: Approval, *, extra_user_ids: list[int]) -> None:
    """Tell the requester (and ``extra_user_ids``) about a change, on commit. Never carries a link."""
    body = approval_body(approval)
    for user_id in dict.fromkeys([approval.requester_id, *extra_user_ids]):
        notify_user_on_commit(tenant_id=approval.tenant_id, user_id=user_id, kind="approval", body=body)


def announce_decided(approval: Approval) -> None:
    """A request was decided or lapsed: tell the requester and every approver it was sent to, and observers."""
    approvers = list(ApprovalLink.objects.filter(approval_id=approval.pk).values_list("approver_id", flat=True))
    _notify(approval, extra_user_ids=approvers)
    for user_id in approvers:
        inbox_left_on_commit(tenant_id=approval.tenant_id, user_id=user_id, key=f"approval_to_decide:{approval.id}")
    inbox_left_on_commit(
        tenant_id=approval.tenant_id, user_id=approval.requester_id, key=f"approval_requested:{approval.id}"
    )
    _observe(approval)


def system_scope_of(approval: Approval) -> Scope:
    """The scope of what Tess does on its own about ``approval`` (executing it, writing its expiry): no actor,
    the request's tenant, session and correlation id."""
    return Scope(
        tenant=approval.tenant,
        actor=None,
        channel=Channel.SYSTEM,
        correlation_id=approval.correlation_id or "-",
        session=approval.session_id,
    )


# --- expiry ----------------------------------------------------------------------------------------------

EXPIRY_BATCH = 500


def approvals_expire_lapsed(*, now: Any = None) -> int:
    """Write requests still pending past their expiry as ``expired``; returns how many (periodic).

    A lapsed request already reads ``expired`` everywhere (``display_status``) and can no longer be decided;
    this makes the lapse a recorded step like a decision: the row's status, an ``approval.expired`` row in
    the tenant's audit chain, and the notices a decision gives (the requester's and the approvers' drawers,
    the session's stream through the observers). Each request is its own conditional UPDATE from
    ``pending``, so of a decision and the sweep racing for it exactly one lands.
    """
    moment = now or timezone.now()
    lapsed = list(
        Approval.objects.filter(status=Approval.Status.PENDING, expires_at__lte=moment)
        .order_by("expires_at")
        .values_list("pk", flat=True)[:EXPIRY_BATCH]
    )
    written = 0
    for approval_id in lapsed:
        with transaction.atomic():
            changed = Approval.objects.filter(
                pk=approval_id, status=Approval.Status.PENDING, expires_at__lte=moment
            ).update(status=Approval.Status.EXPIRED)
            if changed != 1:  # decided (or swept by another worker) in the meantime
                continue
            approval = Approval.objects.select_related("tenant").get(pk=approval_id)
            record_audit(
                system_scope_of(approval),  # nobody decided: a system entry under the request's correlation id
                action="approval.expired",
                target_type=approval.target_type,
                target_id=approval.target_id,
                outcome="expired",
                metadata={"approval_id": str(approval.id), "session_id": approval.session_id},
            )
            announce_decided(approval)
            written += 1
    return written


# --- executing -------------------------------------------------------------------------------------------


def approval_consume(*, approval_id: Any, action: str, target_type: str, target_id: str) -> Approval:
    """Mark an approved, unused approval of exactly ``action`` on ``target_type:target_id`` as used.

    For executors, inside the execution transaction: a conditional UPDATE, so it succeeds once per
    approval however often it is called. Raises ``approval_not_usable`` otherwise.
    """
    changed = Approval.objects.filter(
        pk=approval_id,
        status=Approval.Status.APPROVED,
        consumed_at__isnull=True,
        action=action,
        target_type=target_type,
        target_id=target_id,
    ).update(consumed_at=timezone.now())
    if changed != 1:
        raise ApprovalNotUsable(details={"approval_id": str(approval_id), "action": action})
    return Approval.objects.get(pk=approval_id)


def approval_record_result(scope: Scope, *, approval: Approval, executed: bool, result: dict[str, Any]) -> Approval:
    """Store an execution's outcome on the approval, audit it, tell the requester, and observe it."""
    approval.execution = Approval.Execution.EXECUTED if executed else Approval.Execution.FAILED
    approval.executed_at = timezone.now()
    approval.result = result
    approval.save(update_fields=["execution", "executed_at", "result"])
    metadata: dict[str, Any] = {"approval_id": str(approval.id), "session_id": approval.session_id}
    code = result.get("error", {}).get("code") if isinstance(result.get("error"), dict) else None
    if code:
        metadata["error_code"] = str(code)
    record_audit(
        scope,
        action="approval.executed" if executed else "approval.failed",
        target_type=approval.target_type,
        target_id=approval.target_id,
        outcome="ok" if executed else "failed",
        metadata=metadata,
    )
    _notify(approval, extra_user_ids=[approval.decided_by_id] if approval.decided_by_id else [])
    _observe(approval)
    return approval


def execution_exists(approval_id: Any) -> bool:
    return ApprovalExecution.objects.filter(approval_id=approval_id).exists()
