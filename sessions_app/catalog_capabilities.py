"""What sessions_app offers the capability registry and the approvals of the catalog (registered in ``ready``).

- The durable inbox/state hooks (seed 000: durable inbox/outbox stays with the session coordinator):
  ``enqueue`` raw input, ``claim`` one item under its lease and deliver it, read a session's ``checkpoint``
  and write one (``checkpoint_write``, with the stream cursor it covers: ``checkpoints.py``; the pump
  writes one at every compaction and resumes from it), and the open ``depth`` of the inbox and outbox.
- Fleet diagnostics' ``session_counts`` (the sessions table lives here).
- The Discord integration's ``status``: configured or not, and the tenant's bound channels and linked
  identities, as counts (never a key or a channel id).
- The executor of ``bootstrap.start``: after approval, start the approved command on the approved
  provider instance and bind the new runtime to the requester as a Tess session.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model

from approvals_app.approvals import ApprovalNotUsable, approval_consume, register_action_executor
from approvals_app.executions import undo_on_failure
from approvals_app.models import Approval
from providers_app.bootstrap import bootstrap_command
from providers_app.capabilities import CapabilityName, capability, register_capability_operation
from providers_app.diagnostics import OPEN_STATES, bounded_reads, capped_count
from providers_app.registry import get_provider
from tess_site.accounts.models import ExternalIdentity
from tess_site.accounts.selectors import roles_for
from tess_site.audit.services import record_audit
from tess_site.errors import Forbidden, InvalidInput
from tess_site.scope import Role, Scope

from . import selectors, services
from .checkpoints import session_checkpoint_write
from .models import InboxItem, IngressBinding, IngressChannel, OutboxItem, Session, SessionStatus

BOOTSTRAP_ACTION = "bootstrap.start"
BOOTSTRAP_TARGET = "runtime_command"


# --- durable inbox/state hooks --------------------------------------------------------------------------


def inbox_enqueue(scope: Scope, *, session_id: object, text: str) -> dict[str, Any]:
    item = services.message_enqueue(scope=scope, session_id=session_id, text=text)
    if isinstance(item, Approval):  # held over a budget until approved
        return {"inbox_id": None, "state": "awaiting_approval", "approval_id": str(item.pk)}
    return {"inbox_id": item.pk, "state": item.state}


def inbox_claim(scope: Scope, *, item_id: int, worker: str) -> dict[str, Any]:
    """Claim inbox item ``item_id`` under a lease and deliver it; ``delivered`` is False if another has it."""
    if not InboxItem.objects.filter(pk=item_id, session__tenant=scope.tenant).exists():
        return {"inbox_id": item_id, "delivered": False}
    return {"inbox_id": item_id, "delivered": services.inbox_deliver(item_id=item_id, worker=worker)}


def session_checkpoint(scope: Scope, *, session_id: object) -> dict[str, Any]:
    session = selectors.access_session(scope=scope, session_id=session_id)
    return {"session_id": str(session.pk), "checkpoint": session.checkpoint or None, "last_seq": session.last_seq}


def queue_depth(scope: Scope, **_: Any) -> dict[str, Any]:
    with bounded_reads():
        return {
            "inbox": capped_count(InboxItem.objects.filter(state__in=OPEN_STATES, session__tenant=scope.tenant)),
            "outbox": capped_count(OutboxItem.objects.filter(state__in=OPEN_STATES, session__tenant=scope.tenant)),
        }


# --- fleet diagnostics and the Discord integration ----------------------------------------------------


def session_counts(scope: Scope, **_: Any) -> dict[str, Any]:
    """The tenant's sessions per status, each count capped (one bounded query per status)."""
    with bounded_reads():
        by_status = {
            str(status): capped_count(Session.objects.filter(tenant=scope.tenant, status=status))
            for status in SessionStatus
        }
    return {"by_status": by_status}


def discord_status(scope: Scope, **_: Any) -> dict[str, Any]:
    with bounded_reads():
        channels = capped_count(
            IngressBinding.objects.filter(channel=IngressChannel.DISCORD, active=True, session__tenant=scope.tenant)
        )
        linked = capped_count(
            ExternalIdentity.objects.filter(tenant=scope.tenant, provider=ExternalIdentity.Provider.DISCORD)
        )
        you = scope.actor is not None and (
            ExternalIdentity.objects.filter(
                tenant=scope.tenant, provider=ExternalIdentity.Provider.DISCORD, user=scope.actor
            ).exists()
        )
    return {
        # Interactions are answered only when Discord is on and its public key verifies them.
        "enabled": bool(getattr(settings, "TESS_DISCORD_ENABLED", True) and settings.TESS_DISCORD_PUBLIC_KEY),
        "application_configured": bool(settings.TESS_DISCORD_APPLICATION_ID),
        "bot_token_configured": bool(settings.TESS_DISCORD_BOT_TOKEN or settings.TESS_DISCORD_BOT_TOKEN_FILE),
        "bound_channels": channels,
        "linked_identities": linked,
        "you_are_linked": you,
    }


# --- runtime bootstrap after approval ----------------------------------------------------------------


def bind_bootstrap(scope: Scope, target_type: str, target_id: str, given: dict[str, Any]) -> dict[str, Any]:
    """What an approval of ``bootstrap.start`` pins: the command's name, its provider instance and argv."""
    if target_type != BOOTSTRAP_TARGET or given.get("command") != target_id or set(given) - {"command", "title"}:
        raise InvalidInput("The parameters do not name this command.", details={"field": "parameters"})
    command = bootstrap_command(scope, target_id)
    # Fail closed before anyone is asked: that instance must offer runtime bootstrap.
    capability(CapabilityName.RUNTIME_BOOTSTRAP, instance=command["provider"]).operation("start")
    title = str(given.get("title") or target_id)[:48]
    return {"command": target_id, "provider": command["provider"], "argv": command["argv"], "title": title}


def execute_bootstrap(scope: Scope, approval: Approval) -> dict[str, Any]:
    """The ``bootstrap.start`` executor: the exact approved command, on the approved instance, for the requester.

    Refuses an approval whose command changed in the configuration since (provider or argv), and a
    requester who is no longer an operator of the tenant.
    """
    params = approval.parameters if isinstance(approval.parameters, dict) else {}
    if approval.action != BOOTSTRAP_ACTION or approval.target_type != BOOTSTRAP_TARGET:
        raise ApprovalNotUsable(details={"approval_id": str(approval.pk)})
    command = bootstrap_command(scope, approval.target_id)
    if params.get("provider") != command["provider"] or params.get("argv") != command["argv"]:
        raise ApprovalNotUsable(details={"approval_id": str(approval.pk)})
    approval_consume(
        approval_id=approval.pk, action=BOOTSTRAP_ACTION, target_type=BOOTSTRAP_TARGET, target_id=approval.target_id
    )
    requester = get_user_model().objects.get(pk=approval.requester_id)
    if not requester.is_active or Role.OPERATOR not in roles_for(user=requester, tenant=scope.tenant):
        raise Forbidden("The requester is no longer an operator here; nothing was started.")
    start = capability(CapabilityName.RUNTIME_BOOTSTRAP, instance=command["provider"]).operation("start")
    runtime = start(scope, title=str(params.get("title") or approval.target_id), argv=command["argv"])
    # Started outside the database: stopped again if this execution does not commit (its retry starts anew).
    undo_on_failure(lambda: get_provider(runtime.ref.instance).terminate(runtime.ref, str(approval.pk), scope))
    session = services.session_bind_started(
        scope=scope, owner=requester, runtime=runtime, title=str(params.get("title") or approval.target_id)
    )
    record_audit(
        scope,
        action=BOOTSTRAP_ACTION,
        target_type=BOOTSTRAP_TARGET,
        target_id=approval.target_id,
        outcome="executed",
        metadata={"approval_id": str(approval.pk), "session_id": str(session.pk), "instance": command["provider"]},
    )
    return {"session_id": str(session.pk), "provider": command["provider"], "runtime_id": session.runtime_id}


def register() -> None:
    inbox = CapabilityName.DURABLE_INBOX_STATE
    register_capability_operation(inbox, "enqueue", inbox_enqueue)
    register_capability_operation(inbox, "claim", inbox_claim)
    register_capability_operation(inbox, "checkpoint", session_checkpoint)
    register_capability_operation(inbox, "checkpoint_write", session_checkpoint_write)
    register_capability_operation(inbox, "depth", queue_depth)
    register_capability_operation(CapabilityName.FLEET_DIAGNOSTICS, "session_counts", session_counts)
    register_capability_operation(CapabilityName.DISCORD_INTEGRATION, "status", discord_status)
    register_action_executor(BOOTSTRAP_ACTION, execute_bootstrap, bind_parameters=bind_bootstrap)
