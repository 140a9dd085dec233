"""Invoking an operator tool of the catalog through the gateway's policy (DESIGN.md, "The authority model").

``catalog_invoke`` takes the caller's Scope, the tool's id, its input and optionally the session the
operator is working in, and:

1. finds the entry (404), requires the operator role (403) and, with a session, the right to operate it;
2. validates the input against the entry's JSON Schema (400 ``catalog_input_invalid`` naming the path);
3. applies ``TESS_TOOL_POLICY`` (403 ``tool_policy_refused`` naming the policy when it does not allow the
   entry's authority: under ``read_only`` only ``tess`` tools run, and nothing is requested or handed off);
   then checks that the capability and operation the entry needs are on offer (501 ``capability_unsupported``
   otherwise — nothing is emulated);
4. applies the entry's authority: ``tess`` runs the read-only operation now and returns its result;
   ``human_approval`` asks for a one-time approval of exactly this action, target and parameters (the
   registered executor runs it once, after an approver approved); ``mos`` hands the request to Mos;
5. audits the invocation (ids and codes only) and, with a session, notes it in the session's stream.

A ``tess`` tool runs with no transaction open (it may wait on a provider, git or an MCP server); the
approval or hand-off of step 4 and the record of step 5 are one short transaction.

A tool that fails after step 2 is recorded (audit and stream) and answered with its typed error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from rest_framework import status as http

from approvals_app.approvals import approval_request
from approvals_app.models import Approval
from providers_app.bootstrap import bootstrap_command
from providers_app.capabilities import CapabilityDescriptor, CapabilityName, capability
from providers_app.catalog import Authority, CatalogEntry, catalog_entry, entry_policy_check, validate_input
from providers_app.gitops import repo_path
from tess_site.audit.services import record_audit
from tess_site.errors import Forbidden, TessError, envelope
from tess_site.scope import Role, Scope

from . import selectors, stream
from .journal import event_append
from .models import Session

SUMMARY_MAX = 200


@dataclass
class Invocation:
    """What one invocation did: a result (``tess``), an approval request, a hand-off, or a typed error."""

    entry: CatalogEntry
    status: str = ""  # done | approval_requested | handed_off | refused
    result: dict[str, Any] | None = None
    approval: Approval | None = None
    handoff: dict[str, Any] | None = None
    error: TessError | None = None

    @property
    def http_status(self) -> int:
        if self.error is not None:
            return self.error.status_code
        return http.HTTP_200_OK if self.status == "done" else http.HTTP_202_ACCEPTED

    def body(self, approval_json: dict[str, Any] | None = None) -> dict[str, Any]:
        if self.error is not None:
            return envelope(self.error.code, self.error.message, {**self.error.details, "tool": self.entry.id})
        return {
            "tool": self.entry.id,
            "authority": str(self.entry.authority),
            "status": self.status,
            "result": self.result,
            "approval": approval_json,
            "handoff": self.handoff,
        }


InvocationFinish = Callable[[Invocation], None]


def catalog_invoke(
    scope: Scope, *, tool_id: str, data: object, session_id: str | None = None, finish: InvocationFinish | None = None
) -> Invocation:
    """Invoke catalog tool ``tool_id`` with input ``data`` as the scope's actor (see the module docstring).

    Raises for requests that are not accepted at all (404 unknown tool or session, 403, 400 bad input);
    anything after that is recorded and returned in ``Invocation.error``. A ``tess`` tool's operation (which
    may ask a provider, a repository or an MCP server) runs outside any transaction of this call; the record
    (audit, stream) and ``finish(invocation)`` (the REST view's idempotency outcome) commit together after it.
    """
    entry = catalog_entry(tool_id)
    if scope.actor is None or not scope.has_role(Role.OPERATOR):
        raise Forbidden("Catalog tools need the operator role.")
    session = _session(scope, session_id)
    if session is not None:
        scope = scope.for_session(str(session.pk))
    params = validate_input(entry, data)
    invocation = Invocation(entry=entry)
    try:
        entry_policy_check(entry)
        if entry.authority is Authority.TESS:
            invocation.result = _run(scope, entry, params)
            invocation.status = "done"
    except TessError as exc:
        invocation.error = exc
        invocation.status = "refused"
    with transaction.atomic():
        if entry.authority is not Authority.TESS and invocation.error is None:
            try:
                if entry.authority is Authority.HUMAN_APPROVAL:
                    invocation.approval = _ask_approval(scope, entry, params, session)
                    invocation.status = "approval_requested"
                else:
                    invocation.handoff = _hand_off(scope, entry, params, session)
                    invocation.status = "handed_off"
            except TessError as exc:
                invocation.error = exc
                invocation.status = "refused"
        _record(scope, invocation, session)
        if finish is not None:
            finish(invocation)
    return invocation


def _session(scope: Scope, session_id: str | None) -> Session | None:
    if session_id is None:
        return None
    session = selectors.access_session(scope=scope, session_id=session_id)
    if not selectors.can_operate(scope=scope, session=session):
        raise Forbidden("Using a tool in this session needs its owner or an operate grant.")
    return session


def _descriptor(scope: Scope, entry: CatalogEntry, params: dict[str, Any]) -> CapabilityDescriptor:
    if entry.capability is CapabilityName.RUNTIME_BOOTSTRAP:
        # Per-instance: the configured command names the instance it runs on.
        return capability(entry.capability, instance=bootstrap_command(scope, params["command"])["provider"])
    return capability(entry.capability)


def _run(scope: Scope, entry: CatalogEntry, params: dict[str, Any]) -> dict[str, Any]:
    assert entry.read_only  # the catalog guarantees it; Tess runs nothing else on its own authority
    operation = _descriptor(scope, entry, params).operation(entry.operation)
    result: dict[str, Any] = operation(scope, **params)
    return result


def _ask_approval(scope: Scope, entry: CatalogEntry, params: dict[str, Any], session: Session | None) -> Approval:
    _descriptor(scope, entry, params).operation(entry.operation)  # fail closed before anyone is asked
    # The binder registered for the action turns ``params`` into exactly what the approver approves.
    return approval_request(
        scope,
        action=entry.action,
        target_type=entry.target_type,
        target_id=str(params[entry.target_field]),
        parameters=params,
        session_id=str(session.pk) if session is not None else None,
        reason=f"catalog tool {entry.id}",
    )


def _hand_off(scope: Scope, entry: CatalogEntry, params: dict[str, Any], session: Session | None) -> dict[str, Any]:
    handoff = _descriptor(scope, entry, params).operation(entry.operation)
    if "repo" in params:
        repo_path(scope, params["repo"])  # Mos is asked only about repositories the tenant has
    summary = f"{entry.title}: " + ", ".join(f"{key}={value}" for key, value in sorted(params.items()))
    result: dict[str, Any] = handoff(
        scope,
        session_id=str(session.pk) if session is not None else None,
        summary=summary[:SUMMARY_MAX],
        payload={"tool": entry.id, "input": params},
    )
    return result


def _record(scope: Scope, invocation: Invocation, session: Session | None) -> None:
    entry = invocation.entry
    record_audit(
        scope,
        action="catalog.invoked",
        target_type="catalog_tool",
        target_id=entry.id,
        outcome=invocation.status,
        metadata={
            "authority": str(entry.authority),
            "capability": str(entry.capability),
            "operation": entry.operation,
            "session_id": str(session.pk) if session is not None else None,
            "approval_id": str(invocation.approval.pk) if invocation.approval is not None else None,
            "handoff_id": invocation.handoff["id"] if invocation.handoff else None,
            "error_code": invocation.error.code if invocation.error is not None else None,
        },
    )
    if session is not None:
        outcome = invocation.error.code if invocation.error is not None else invocation.status
        event_append(
            session_id=session.pk,
            kind=stream.EventKind.SYSTEM,
            body=stream.system_body(text=f"Catalog tool {entry.id}: {outcome}.", code="catalog.invoked"),
        )
