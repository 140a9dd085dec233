"""The session coordinator: every write to sessions, their stream, attachments, inbox and grants.

Functions take a server-derived ``Scope`` (keyword-only). Provider calls that can block (send, pump)
run in tasks (``tasks.py``), which call the ``*_deliver``/``*_pump`` functions here with ids. No provider
call runs inside a transaction: the services that call one inline (start, adopt, attach, detach) call it
before or after their one short transaction, and take ``finish`` (run inside that transaction with its
result) for the REST view's idempotency outcome, so the effect and the stored answer commit together.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from guardian.shortcuts import assign_perm, remove_perm

from approvals_app.models import Approval
from providers_app.contract import (
    AgentObservation,
    AgentRuntimeProvider,
    AttachmentRequired,
    CapabilityUnsupported,
    CursorLost,
    ProviderError,
    ProviderUnavailable,
    RuntimeNotFound,
    RuntimeSession,
    Screen,
    StreamPage,
    TerminalProvider,
)
from providers_app.contract import (
    AgentState as ObservedState,
)
from providers_app.contract import AttachMode as ProviderAttachMode
from providers_app.heartbeat import heartbeat_require_fresh, heartbeat_stale_since
from providers_app.registry import configured_instances, get_provider
from tess_site.audit.services import record_audit
from tess_site.errors import Conflict, Forbidden, InvalidInput, NotFound
from tess_site.leases import LeaseLost, LeaseState, claim, complete, fail, requeue_due
from tess_site.scope import Channel, Role, Scope

from . import agent_state, events, selectors, stream
from .budgets import budget_blocking
from .checkpoints import checkpoint_record, stream_resume
from .inbox_input import input_queue
from .inbox_source import announce_waiting
from .journal import event_append, events_append
from .lifecycle import capture_on_commit, ended_text
from .models import (
    AgentState,
    AttachMode,
    InboxItem,
    IngressBinding,
    RuntimeAttachment,
    Session,
    SessionStatus,
)
from .over_budget import over_budget_request
from .scopes import system_scope
from .terminate import terminate_request
from .usage import usage_record
from .wakeups import DELIVER_INBOX_ITEM, wake_on_commit
from .workspace import check_session_workspace

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 4000

T = TypeVar("T")
Finish = Callable[[T], None] | None


# --- sessions: start, adopt, discover ---------------------------------------------------------------


def _check_instance(scope: Scope, instance: str) -> None:
    """An instance may be limited to some tenants (config ``tenants``); elsewhere it does not exist."""
    config = configured_instances().get(instance)
    allowed = config.get("tenants") if config else None
    if config is None or (allowed is not None and scope.tenant.slug not in allowed):
        raise NotFound(f"No runtime provider instance named {instance!r}.")


def _bind(
    *,
    scope: Scope,
    owner: User,
    runtime: RuntimeSession,
    title: str,
    action: str,
    finish: Finish[Session] = None,
    workspace_key: str = "",
) -> Session:
    try:
        with transaction.atomic():
            session = Session.objects.create(
                tenant=scope.tenant,
                owner=owner,
                title=title or runtime.title,
                provider_instance=runtime.ref.instance,
                runtime_id=runtime.ref.runtime_id,
                runtime_identity=dict(runtime.ref.identity),
                workspace_key=workspace_key,
            )
            event_append(
                session_id=session.pk,
                kind=stream.EventKind.STATUS,
                body=stream.status_body(status="running", agent_state=session.agent_state, since=None),
            )
            record_audit(
                scope,
                action=action,
                target_type="session",
                target_id=str(session.pk),
                outcome="ok",
                metadata={
                    "instance": runtime.ref.instance,
                    "owner_id": owner.pk,
                    "workspace_key": workspace_key or None,
                },
            )
            events.board_changed_on_commit(tenant_id=session.tenant_id, session_id=session.pk)
            if finish is not None:
                finish(session)
    except IntegrityError as exc:
        raise Conflict("That runtime session is already bound to a Tess session.") from exc
    return session


def session_bind_started(*, scope: Scope, owner: User, runtime: RuntimeSession, title: str) -> Session:
    """Bind a runtime Tess started on ``owner``'s behalf (the catalog's runtime bootstrap, after approval)."""
    return _bind(scope=scope, owner=owner, runtime=runtime, title=title, action="session.bootstrap")


def session_start(
    *, scope: Scope, instance: str, title: str, finish: Finish[Session] = None, workspace_key: str = ""
) -> Session:
    """Start a runtime session with the instance's configured command and bind it to the caller (with the
    workspace it works on, if named).

    A client never supplies a command: running anything else is the catalog's runtime bootstrap, which
    needs approval (seed 001, authority model).
    """
    if not scope.has_role(Role.OPERATOR) or scope.actor is None:
        raise Forbidden("Starting a session needs the operator role.")
    key = check_session_workspace(workspace_key)  # refused before a runtime is started for nothing
    _check_instance(scope, instance)
    runtime = get_provider(instance).start_session(scope, title=title)
    return _bind(
        scope=scope,
        owner=scope.actor,
        runtime=runtime,
        title=title,
        action="session.start",
        finish=finish,
        workspace_key=key,
    )


def runtime_discovered(*, scope: Scope) -> list[RuntimeSession]:
    """Runtime sessions on this tenant's instances that no live Tess session binds: tenant admins only."""
    if not scope.has_role(Role.ADMIN):
        raise Forbidden("Only tenant admins see runtime sessions nobody owns.")
    found: list[RuntimeSession] = []
    for name in sorted(configured_instances()):
        try:
            _check_instance(scope, name)
        except NotFound:
            continue
        bound = selectors.bound_runtime_ids(instance=name)
        found.extend(r for r in get_provider(name).list_sessions(scope) if r.ref.runtime_id not in bound)
    return found


def session_adopt(
    *,
    scope: Scope,
    instance: str,
    runtime_id: str,
    assignee: str,
    title: str = "",
    finish: Finish[Session] = None,
    workspace_key: str = "",
) -> Session:
    """A tenant admin binds a discovered runtime session to an operator of the tenant."""
    if not scope.has_role(Role.ADMIN):
        raise Forbidden("Only tenant admins adopt runtime sessions.")
    key = check_session_workspace(workspace_key)
    _check_instance(scope, instance)
    owner = (
        get_user_model()
        .objects.filter(username=assignee, tess_memberships__tenant=scope.tenant, tess_memberships__role="operator")
        .first()
    )
    if owner is None:
        raise InvalidInput("The assignee must be an operator of this tenant.", details={"field": "assignee"})
    runtime = next((r for r in get_provider(instance).list_sessions(scope) if r.ref.runtime_id == runtime_id), None)
    if runtime is None:
        raise NotFound("No such runtime session on that instance.")
    return _bind(
        scope=scope, owner=owner, runtime=runtime, title=title, action="session.adopt", finish=finish, workspace_key=key
    )


# --- grants -----------------------------------------------------------------------------------------


def session_grant(*, scope: Scope, session_id: object, grantee: User, operate: bool = False) -> None:
    """The owner (or a tenant admin) lets a member of the tenant read, and optionally operate, a session."""
    session = selectors.access_session(scope=scope, session_id=session_id)
    _require_owner_or_admin(scope, session)
    if not grantee.tess_memberships.filter(tenant=scope.tenant).exists():
        raise InvalidInput("The grantee must be a member of this tenant.", details={"field": "grantee"})
    assign_perm(selectors.VIEW, grantee, session)
    if operate:
        assign_perm(f"sessions_app.{selectors.OPERATE}", grantee, session)


def session_revoke(*, scope: Scope, session_id: object, grantee: User) -> None:
    """Take every grant on the session away; the grantee's open streams close within seconds."""
    session = selectors.access_session(scope=scope, session_id=session_id)
    _require_owner_or_admin(scope, session)
    with transaction.atomic():
        remove_perm(selectors.VIEW, grantee, session)
        remove_perm(f"sessions_app.{selectors.OPERATE}", grantee, session)
        RuntimeAttachment.objects.filter(session=session, user=grantee, detached_at=None).update(
            detached_at=timezone.now()
        )
        events.recheck_session_on_commit(session.pk)


def _actor_id(scope: Scope) -> int:
    assert scope.actor is not None, "only people attach"
    return int(scope.actor.pk)


def _require_owner_or_admin(scope: Scope, session: Session) -> None:
    if scope.actor is None or (session.owner_id != scope.actor.pk and not scope.has_role(Role.ADMIN)):
        raise Forbidden("Only the session's owner or a tenant admin may do that.")


# --- ingress bindings -------------------------------------------------------------------------------


def ingress_bind(*, scope: Scope, session_id: object, channel: str, external_ref: str) -> IngressBinding:
    """Bind ``external_ref`` on ``channel`` to the session, moving it off any session it bound before."""
    session = selectors.access_session(scope=scope, session_id=session_id)
    with transaction.atomic():
        IngressBinding.objects.select_for_update().filter(
            channel=channel, external_ref=external_ref, active=True
        ).update(active=False, ended_at=timezone.now())
        return IngressBinding.objects.create(session=session, channel=channel, external_ref=external_ref)


# --- attachments --------------------------------------------------------------------------------------


def session_attach(
    *, scope: Scope, session_id: object, mode: AttachMode, finish: Finish[RuntimeAttachment] = None
) -> RuntimeAttachment:
    """Attach the caller; ``interactive`` needs the right to operate and a provider that allows it."""
    session = selectors.access_session(scope=scope, session_id=session_id)
    if session.status != SessionStatus.RUNNING:
        raise Conflict("The session is not running.")
    if mode == AttachMode.INTERACTIVE and not selectors.can_operate(scope=scope, session=session):
        raise Forbidden("Interactive attachment needs the owner or an operate grant.")
    get_provider(session.provider_instance).attach(session.runtime_ref, ProviderAttachMode(mode), scope)
    now = timezone.now()
    with transaction.atomic():
        RuntimeAttachment.objects.filter(session=session, user=scope.actor, detached_at=None).update(detached_at=now)
        attachment = RuntimeAttachment.objects.create(session=session, user_id=_actor_id(scope), mode=mode)
        record_audit(
            scope,
            action="session.attach",
            target_type="session",
            target_id=str(session.pk),
            outcome="ok",
            metadata={"mode": str(mode), "attachment_id": attachment.pk},
        )
        if finish is not None:
            finish(attachment)
    return attachment


def session_detach(*, scope: Scope, session_id: object, finish: Finish[int] = None) -> int:
    """End the caller's attachments; returns how many ended."""
    session = selectors.access_session(scope=scope, session_id=session_id)
    with transaction.atomic():
        ended = RuntimeAttachment.objects.filter(session=session, user=scope.actor, detached_at=None).update(
            detached_at=timezone.now()
        )
        record_audit(
            scope,
            action="session.detach",
            target_type="session",
            target_id=str(session.pk),
            outcome="ok",
            metadata={"ended": ended},
        )
        if finish is not None:
            finish(ended)
    if not selectors.active_attachments(session=session).exists():
        try:
            get_provider(session.provider_instance).detach(session.runtime_ref, scope)
        except ProviderError:
            logger.info("provider detach of %s failed; the attachment ended in Tess anyway", session.pk)
    return ended


# --- raw messages: queued to the inbox, delivered by a task ---------------------------------------------


def message_enqueue(*, scope: Scope, session_id: object, text: str, keys: bool = False) -> InboxItem | Approval:
    """Queue raw input for the runtime. Needs a live interactive attachment of the caller.

    ``keys``: a terminal's keystrokes, typed exactly as they are (no Enter added); only a provider whose
    sessions are terminals takes them (``capability_unsupported`` otherwise, before anything is queued).
    While a ``require_approval`` budget of the session has reached its limit, the input is held in an
    approval request instead (returned), and delivered once approved.
    """
    if not text or len(text) > MAX_MESSAGE_CHARS:
        raise InvalidInput(f"A message has 1 to {MAX_MESSAGE_CHARS} characters.", details={"field": "text"})
    session = selectors.access_session(scope=scope, session_id=session_id)
    if session.status != SessionStatus.RUNNING:
        raise Conflict("The session is not running.")
    if keys and not isinstance(get_provider(session.provider_instance), TerminalProvider):
        raise CapabilityUnsupported(
            "This session's runtime is not a terminal: send a message instead.",
            details={"provider": session.provider_instance, "operation": "send_keys"},
        )
    attachment = selectors.interactive_attachment_of(scope=scope, session=session)
    if attachment is None or not selectors.can_operate(scope=scope, session=session):
        raise AttachmentRequired()
    heartbeat_require_fresh(session.provider_instance)  # 503 now, rather than a queued item that cannot go
    assert scope.actor is not None
    # What the runtime spends on this input is its owner's (the ledger's operator of runtime steps).
    over = budget_blocking(session=session, operator_id=session.owner_id)
    if over is not None:
        return over_budget_request(scope=scope, session=session, budget=over, kind="message", text=text, keys=keys)
    with transaction.atomic():
        RuntimeAttachment.objects.filter(pk=attachment.pk).update(last_activity_at=timezone.now())
        return input_queue(
            scope,
            session,
            created_by_id=scope.actor.pk,
            channel=scope.channel.value,
            correlation_id=scope.correlation_id,
            text=text,
            keys=keys,
        )


def inbox_deliver(*, item_id: int, worker: str, retry_in_seconds: int = 5) -> bool:
    """Deliver one inbox item if this worker can claim it. True when this call delivered it.

    The provider dedupes on the item's ``provider_key``, so a worker that sent and then lost its lease
    (killed before recording) does not make the next worker's delivery a second send.
    """
    item = claim(InboxItem, pk=item_id, worker=worker)
    if item is None:
        return False
    if item.keys and _earlier_keys_open(item):
        # Keystrokes are typed in the order they came: this item waits (its claim not counted as an attempt),
        # and the earlier one wakes it once it is done.
        InboxItem.objects.filter(pk=item.pk, state=LeaseState.LEASED, lease_owner=worker).update(
            state=LeaseState.PENDING, lease_owner="", lease_expires_at=None, attempts=F("attempts") - 1
        )
        if not _earlier_keys_open(item):  # finished meanwhile: its wake-up found this item leased
            wake_on_commit(DELIVER_INBOX_ITEM, item.pk)
        return False
    session = Session.objects.select_related("tenant", "owner").get(pk=item.session_id)
    actor = get_user_model().objects.get(pk=item.created_by_id)
    scope = Scope(
        tenant=session.tenant,
        actor=actor,
        channel=Channel(item.channel),
        correlation_id=item.correlation_id or "-",
        session=str(session.pk),
    )
    try:
        heartbeat_require_fresh(session.provider_instance)
        provider = get_provider(session.provider_instance)
        if item.keys:
            if not isinstance(provider, TerminalProvider):
                raise CapabilityUnsupported("This session's runtime is not a terminal.")
            provider.send_keys(session.runtime_ref, item.text, item.provider_key, scope)
        else:
            provider.send_message(session.runtime_ref, item.text, item.provider_key, scope)
    except ProviderUnavailable as exc:
        fail(item, worker=worker, error=exc.code, retry_in_seconds=retry_in_seconds)
        raise
    except ProviderError as exc:
        # Not transient: retrying would not help. Fail the item and say so in the stream.
        with transaction.atomic():
            InboxItem.objects.filter(pk=item.pk, lease_owner=worker).update(
                state=LeaseState.FAILED, last_error=exc.code, lease_owner="", lease_expires_at=None
            )
            event_append(
                session_id=session.pk,
                kind=stream.EventKind.SYSTEM,
                body=stream.system_body(text=f"message {item.pk} was not delivered", code=exc.code),
            )
            _wake_next_keys(item)
        return False
    with transaction.atomic():
        if not complete(item, worker=worker):
            raise LeaseLost(f"inbox item {item.pk}: lease lost after sending")
        event = event_append(
            session_id=session.pk,
            kind=stream.EventKind.MESSAGE_IN,
            body=stream.message_in_body(inbox_id=item.pk, text=item.text, channel=item.channel),
        )
        InboxItem.objects.filter(pk=item.pk).update(delivered_seq=event.seq)
        _wake_next_keys(item)
    return True


def _earlier_keys_open(item: InboxItem) -> bool:
    """Whether keystrokes queued before ``item`` for its session are still to be typed."""
    return InboxItem.objects.filter(
        session_id=item.session_id,
        keys=True,
        pk__lt=item.pk,
        state__in=(LeaseState.PENDING, LeaseState.LEASED),
    ).exists()


def _wake_next_keys(item: InboxItem) -> None:
    if not item.keys:
        return
    following = (
        InboxItem.objects.filter(session_id=item.session_id, keys=True, pk__gt=item.pk, state=LeaseState.PENDING)
        .order_by("pk")
        .values_list("pk", flat=True)
        .first()
    )
    if following is not None:
        wake_on_commit(DELIVER_INBOX_ITEM, following)


def wake_inbox_item(pk: object) -> None:
    """The lease sweeper's wake-up for a re-queued inbox item."""
    wake_on_commit(DELIVER_INBOX_ITEM, pk)


def inbox_requeue_due() -> int:
    """Wake items left pending after a transient failure once they are due again (their task gave up)."""
    return requeue_due(InboxItem, wake_inbox_item, settle_seconds=5)


# --- the screen --------------------------------------------------------------------------------------


def session_screen(*, scope: Scope, session_id: object) -> tuple[Session, Screen]:
    """What the session's terminal shows now, for whoever may read its stream (a read: nothing recorded).

    The session row is read before the screen, so ``last_seq`` never counts output newer than the screen;
    output the pump has not stored yet is after the screen's cursor, and a viewer draws it on top.
    """
    session = selectors.access_session(scope=scope, session_id=session_id)
    provider = get_provider(session.provider_instance)
    if not isinstance(provider, TerminalProvider):
        raise CapabilityUnsupported(
            "This session's runtime has no screen: its output is its text.",
            details={"provider": session.provider_instance, "operation": "screen_snapshot"},
        )
    if session.status != SessionStatus.RUNNING:
        raise Conflict("The session has ended: its output is all in its stream.")
    return session, provider.screen_snapshot(session.runtime_ref, scope)


# --- terminate ----------------------------------------------------------------------------------------


def session_terminate(*, scope: Scope, session_id: object, reason: str = "") -> Approval:
    """Ask to terminate: a pending approval for exactly this session and action (nothing is killed here).

    Once an approver approves it, approvals_app runs ``terminate.execute_terminate`` exactly once.
    """
    session = selectors.access_session(scope=scope, session_id=session_id)
    _require_owner_or_admin(scope, session)
    return terminate_request(scope=scope, session=session, reason=reason)


# --- the pump: provider output → output events ----------------------------------------------------------


def session_pump(*, session_id: uuid.UUID, limit: int = 65536) -> int:
    """Read new output of one running session from its cursor and append it as ``output`` events.

    The session row stays locked from reading the cursor to writing the new one (with the events), so
    two pumps never write the same output twice; a pump that finds the row locked skips it.
    Returns how many events were written.
    """
    with transaction.atomic():
        session = (
            Session.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("tenant")
            .filter(pk=session_id, status=SessionStatus.RUNNING)
            .first()
        )
        if session is None:
            return 0
        provider = get_provider(session.provider_instance)
        stale_since = heartbeat_stale_since(session.provider_instance)
        items: list[tuple[stream.EventKind, Any]] = []
        try:
            scope = system_scope(session)
            if stale_since is not None:
                # No heartbeat: not asked (it may hang); its output waits at the cursor for its return.
                page = StreamPage(chunks=(), next_cursor=session.cursor, ended=False)
            else:
                page = _stream_page(session, provider, scope, items, limit=limit)
        except RuntimeNotFound:
            # The runtime is gone (or its id now means another session): nothing more will come.
            page = StreamPage(chunks=(), next_cursor=session.cursor, ended=True)
        fields: dict[str, Any] = {"cursor": page.next_cursor}
        steps = [c.usage for c in page.chunks if c.usage is not None]
        for c in page.chunks:
            if c.data:
                items.append(
                    (
                        stream.EventKind.OUTPUT,
                        stream.output_body(data=c.data, source=c.source, cursor=c.cursor, next_cursor=c.next_cursor),
                    )
                )
            if c.checkpoint:
                # The runtime compacted its context: keep where, so the stream can be recovered (seed 001).
                fields["checkpoint"] = checkpoint_record(
                    scope=scope, session=session, checkpoint=c.checkpoint, cursor=c.cursor, items=items
                )
        now = timezone.now()
        if page.ended:
            items.append(
                (
                    stream.EventKind.STATUS,
                    stream.status_body(status=SessionStatus.EXITED, agent_state=AgentState.ENDED, since=now),
                )
            )
            fields |= {"status": SessionStatus.EXITED, "agent_state": AgentState.ENDED, "agent_state_since": now}
            fields |= {"agent_state_seen": "", "agent_state_seen_since": None}
            capture_on_commit(session_id=session.pk, source="session.ended", text=ended_text(session, "exited"))
        else:
            fields |= _agent_state_change(session, provider, now, items, stale_since=stale_since)
        events_append(session_id=session.pk, items=items)
        usage_record(session=session, steps=steps)  # with the cursor that read them: each step once
        if page.next_cursor != session.cursor or len(fields) > 1:
            Session.objects.filter(pk=session.pk).update(**fields)
        if "agent_state" in fields:
            _announce_agent_state(session, fields["agent_state"], fields.get("agent_state_since"))
    return len(items)


def _stream_page(
    session: Session,
    provider: AgentRuntimeProvider,
    scope: Scope,
    items: list[tuple[stream.EventKind, Any]],
    *,
    limit: int,
) -> StreamPage:
    """The next page from the session's cursor; if the runtime rewrote its stream under that cursor, from the
    same point found again through the checkpoint (``checkpoints.stream_resume``)."""
    try:
        return provider.stream_session(session.runtime_ref, session.cursor or None, scope, limit=limit)
    except CursorLost:
        cursor = stream_resume(session=session, provider=provider, scope=scope, items=items)
        return provider.stream_session(session.runtime_ref, cursor, scope, limit=limit)


def _announce_agent_state(session: Session, new_state: str, since: datetime | None) -> None:
    """After commit: the owner's inbox gains or loses the session when it starts or stops waiting for input,
    and the tenant's board sockets re-read its row. Called in the transaction that wrote the change."""
    was_waiting = session.agent_state == AgentState.WAITING_FOR_INPUT
    waiting = new_state == AgentState.WAITING_FOR_INPUT
    if waiting != was_waiting:
        session.agent_state, session.agent_state_since = new_state, since
        announce_waiting(session, waiting=waiting)
    events.board_changed_on_commit(tenant_id=session.tenant_id, session_id=session.pk)


def _agent_state_change(
    session: Session,
    provider: AgentRuntimeProvider,
    now: datetime,
    items: list[tuple[stream.EventKind, Any]],
    *,
    stale_since: datetime | None = None,
) -> dict[str, Any]:
    """Look at the agent's state; the row's fields to write, and a ``status`` event in ``items`` when the
    announced state changes (once per change: the caller holds the row lock).

    With the provider's heartbeat stale since ``stale_since``, nobody can tell what the agent does: the
    observation is ``unknown`` from then on, without asking the provider, and goes through the same debounce."""
    try:
        if stale_since is not None:
            observation = AgentObservation(state=ObservedState.UNKNOWN, reason="heartbeat stale", since=stale_since)
        else:
            observation = provider.agent_state(session.runtime_ref, system_scope(session))
    except RuntimeNotFound:
        return {}  # gone: the stream says ``ended`` once its output is drained
    except ProviderError as exc:
        logger.info("agent state of %s not read this time: %s", session.pk, exc.code)
        return {}
    change = agent_state.step(
        current=session.agent_state,
        current_since=session.agent_state_since,
        seen=session.agent_state_seen,
        seen_since=session.agent_state_seen_since,
        observed=observation.state,
        observed_since=observation.since,
        now=now,
        debounce=provider.agent_state_debounce,
    )
    if change.announce:
        since = change.fields["agent_state_since"]
        body = stream.status_body(status=session.status, agent_state=observation.state, since=since)
        items.append((stream.EventKind.STATUS, body))
    return change.fields


def session_mark_exited(*, session_id: uuid.UUID) -> bool:
    """Record that a session's runtime is gone (e.g. its tmux server did not survive a reboot)."""
    with transaction.atomic():
        changed = Session.objects.filter(pk=session_id, status=SessionStatus.RUNNING).update(
            status=SessionStatus.EXITED, updated_at=timezone.now()
        )
        if changed:
            now = timezone.now()
            Session.objects.filter(pk=session_id).update(
                agent_state=AgentState.ENDED, agent_state_since=now, agent_state_seen="", agent_state_seen_since=None
            )
            event_append(
                session_id=session_id,
                kind=stream.EventKind.STATUS,
                body=stream.status_body(status="exited", agent_state=AgentState.ENDED, since=now),
            )
            session = Session.objects.get(pk=session_id)
            capture_on_commit(session_id=session_id, source="session.ended", text=ended_text(session, "exited"))
            announce_waiting(session, waiting=False)
            events.board_changed_on_commit(tenant_id=session.tenant_id, session_id=session_id)
    return bool(changed)


def running_session_ids() -> list[uuid.UUID]:
    return list(Session.objects.filter(status=SessionStatus.RUNNING).values_list("pk", flat=True))
