"""The gateway: one operator turn, from any channel (DESIGN.md, "The copilot turn").

A channel (the REST view, which the drawer and the CLI use, and Discord's deferred ask) verifies its
caller and derives a ``Scope`` from the credential; ``turn_handle`` does the rest, in three steps so that
no transaction, lock or database connection is held while a model or a provider is asked:

1. *Accept* (one short transaction): access check, deterministic intent under the authority model, and a
   ``TurnRun`` row saying the turn is running (the REST view has committed its idempotency key in flight
   just before).
2. *Think* (no transaction; the connection given back to the pool): for answers, the provider's live state,
   operator-memory recall (if served), the startup context, prompt assembly and the model adapter. Actions
   (cards, approvals, hand-offs) ask nothing slow and skip it.
3. *Write* (one short transaction): the ``TurnRun`` row is taken (gone: the turn was abandoned and is
   already written as failed, so nothing is written), then ``turn.in``, what an action causes (card,
   approval, hand-off events, after its ``turn.in``), ``system`` lines and ``turn.out``, the audit row, and
   the channel's own record (``finish``: the idempotency outcome, Discord's reply) commit together.

A failure in this process between the steps writes nothing and frees the key (the caller gets the typed
error); a process that dies leaves the ``TurnRun`` row, which ``turns_fail_abandoned`` writes into the
stream as a failed turn once it is older than ``turn_abandoned_after()``; its key may be retried after
``TESS_IDEMPOTENCY_LOCK_SECONDS``, and only one of two attempts on a key can write (``KeyHold.finish``). Every
event lands in the session stream, so every bound channel sees the same turn. The ``TurnRun`` row is the
handle a Stop marks (``turn_stop``), and step 2 the place it interrupts: the model call is closed, and the turn
is written as stopped (``turn.out`` with ``stopped``) with the text shown so far.

What a turn may do is decided by ``gateway_intent.classify`` before any model runs: answers (conversation,
status, retrieval, safe diagnostics), a memory card (the operator's own words, confirmed later), an approval request
(terminate), a Mos hand-off (coding work), or a typed refusal. A model only phrases answers.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from rest_framework import status

from approvals_app.handoffs import handoff_create, result_text
from approvals_app.models import Approval, Handoff
from memory_app.errors import MemoryUnavailable
from memory_app.plugin.registry import operator_memory_plugin
from memory_app.services import Recall, memory_propose_once, memory_scope_for, recall_for_prompt
from providers_app.contract import ProviderError
from providers_app.heartbeat import heartbeat_require_fresh
from providers_app.http_cancel import CancelEvent
from providers_app.model_adapters import (
    DeterministicAdapter,
    ModelAdapter,
    ModelError,
    ModelReply,
    ModelRequest,
    ModelStopped,
    ModelUsage,
    get_model_adapter,
    usage_estimate,
)
from providers_app.registry import get_provider
from tess_site.accounts.selectors import roles_for
from tess_site.audit.services import record_audit
from tess_site.errors import (
    Forbidden,
    InvalidInput,
    ServiceUnavailable,
    TessError,
    database_unavailable,
    envelope,
)
from tess_site.rows import hot_cursor
from tess_site.scope import Channel, Role, Scope
from tess_site.tool_policy import tool_policy_check
from tess_site.transactions import commit_without_flush_wait, connection_release

from . import selectors, stream
from .budgets import Admission, budget_admit
from .conversation import PendingSummary, conversation_build, conversation_summary_store, summarised_line
from .gateway_context import project_context
from .gateway_intent import ANSWERED, Intent, IntentClass, classify
from .gateway_prompt import prompt_assemble, standing_initiative_of
from .gateway_retrieval import Found, retrieval_for_turn
from .gateway_tools import catalog_invoke
from .journal import event_append, events_append
from .lifecycle import capture_on_commit
from .models import Budget, Session, SessionEvent, TurnRun
from .over_budget import ACTION as OVER_BUDGET_ACTION
from .over_budget import over_budget_request
from .replies import ReplyDeltas, ReplyProgress
from .services import session_terminate
from .terminate import ACTION as TERMINATE_ACTION
from .turn_stop import stop_watch
from .usage import usage_record

logger = logging.getLogger(__name__)

MAX_TURN_CHARS = 4000


class IntentUnsupported(TessError):
    code = "intent_unsupported"
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_message = "Tess does not do that; nothing was done."


@dataclass
class TurnResult:
    """What one turn did. ``error`` is set when the turn was recorded but refused (typed, naming why)."""

    turn_id: str
    session_id: str
    intent: IntentClass
    reply: str = ""
    memory_scope: str = "session"
    recalled_count: int = 0
    recalled_ids: list[str] = field(default_factory=list)
    grounded: bool = False
    adapter: str = ""
    cards: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    handoffs: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    system_lines: list[tuple[str, str]] = field(default_factory=list)  # (code, text)
    summary: PendingSummary | None = None  # a conversation summary made while thinking, stored with the turn
    usage: ModelUsage | None = None  # what the model call consumed (reported or estimated), for the ledger
    model: str = ""
    model_adapter: str = ""  # the adapter that consumed it (the ledger's provider), even when a fallback answered
    over_budget: Budget | None = None  # the require_approval budget this turn became an approval under
    error: TessError | None = None
    stopped: bool = False  # stopped while answering: ``reply`` is the text shown by then

    def body(self) -> dict[str, Any]:
        body = {
            "turn_id": self.turn_id,
            "intent": self.intent.value,
            "reply": self.reply,
            "memory": {"scope": self.memory_scope, "recalled_count": self.recalled_count, "grounded": self.grounded},
            "cards": self.cards,
            "approvals": self.approvals,
            "handoffs": self.handoffs,
            "events": self.events,
            "stopped": self.stopped,
        }
        if self.error is not None:
            return envelope(self.error.code, self.error.message, {**self.error.details, "turn": body})
        return body

    @property
    def http_status(self) -> int:
        if self.error is None:
            return status.HTTP_200_OK
        # The turn itself was recorded; a refusal of what it asked is 422 unless the error says more.
        return self.error.status_code if self.error.status_code >= 403 else status.HTTP_422_UNPROCESSABLE_ENTITY


# --- the turn -----------------------------------------------------------------------------------------


def _check_turn(scope: Scope, session: Session, text: str) -> None:
    if not text.strip() or len(text) > MAX_TURN_CHARS:
        raise InvalidInput(f"A turn has 1 to {MAX_TURN_CHARS} characters.", details={"field": "text"})
    if not scope.has_role(Role.OPERATOR) or not selectors.can_operate(scope=scope, session=session):
        raise Forbidden("Turns need the operator role and the session's owner or an operate grant.")


class TurnAbandoned(ServiceUnavailable):
    code = "turn_abandoned"
    default_message = "This turn ran too long and was recorded as failed; nothing was done. Send it again."


TurnFinish = Callable[[TurnResult], None]


def turn_handle(
    *,
    scope: Scope,
    session_id: str,
    text: str,
    finish: TurnFinish | None = None,
    progress: ReplyProgress | None = None,
    over_budget_approved: bool = False,
) -> TurnResult:
    """Handle one turn of ``scope``'s actor in a session; raise only for a turn that is not accepted at all
    (404, 403, 400), or that could not be written (503).

    ``scope`` comes from the channel's verified credential (a token, a browser session, a Discord signature
    plus a linked identity), never from the message itself. ``finish(result)`` runs inside the transaction
    that writes the turn (the REST view stores its idempotency outcome there, Discord queues its reply), so
    the turn and what its channel records about it commit together. ``progress`` sees the reply grow (a
    channel that shows it its own way: Discord); it is closed before the turn is written.

    A turn that would ask the model while a ``require_approval`` budget of it has reached its limit becomes an
    approval request instead (``budgets``); ``over_budget_approved`` runs the turn such a request approved.
    """
    actor = scope.actor
    if actor is None:
        raise InvalidInput("A turn belongs to a person.")
    stale = timezone.now() - timedelta(seconds=turn_abandoned_after())
    # Step 1: accept the turn (access, intent) and record it as running, in a short transaction.
    with transaction.atomic():
        commit_without_flush_wait()  # it marks the turn running; step 3's commit waits for both (transactions)
        session, had_turn, abandoned, budgeted = selectors.access_session_for_turn(
            scope=scope, session_id=session_id, stale_before=stale
        )
        scope = scope.for_session(str(session.pk))
        _check_turn(scope, session, text)
        intent = classify(text)
        result = TurnResult(turn_id=uuid.uuid4().hex, session_id=str(session.pk), intent=intent.cls)
        answering = intent.cls in ANSWERED
        admit = answering and budgeted and not over_budget_approved  # a tenant with no budget admits every turn
        admission = _admit(session, actor.pk) if admit else Admission()
        if admission.blocked_by is not None:
            result.over_budget, answering = admission.blocked_by, False
        TurnRun.objects.create(
            turn_id=result.turn_id,
            session=session,
            actor=actor,
            channel=scope.channel.value,
            text=text,
            reserved_tokens=admission.tokens,
            reserved_cost=admission.cost,
            reserved_currency=admission.currency,
        )
    try:
        if abandoned:  # before this turn is written, so a retry finds the failed attempt in the stream first
            turns_fail_abandoned()
        if answering:
            # Step 2: live state, recall, prompt and model, with no transaction or lock held, and the
            # connection given back before each wait on a provider or the model.
            connection_release()
            _answer(scope, session, intent, text, result, first_turn=not had_turn, progress=progress)
        # Step 3: write the turn whole in one short transaction, or nothing if it was abandoned meanwhile.
        with transaction.atomic():
            stop_requested = _claim(result.turn_id)
            if answering:
                # A Stop that came after the model finished (or whose wake-up was lost) still wins: it was
                # answered as stopping, and the whole reply is what was shown.
                result.stopped = result.stopped or stop_requested
                items = [*_summary_line(session, result), _turn_in(scope, text, result), *_turn_out(result)]
                rows = events_append(session_id=session.pk, items=items)
            else:
                # Actions append turn.in first: what they cause (card, approval, hand-off events) follows it.
                first = event_append(
                    session_id=session.pk, kind=stream.EventKind.TURN_IN, body=_turn_in(scope, text, result)[1]
                )
                result.memory_scope = memory_scope_for(scope)
                _act(scope, session, intent, text, result)
                events_append(session_id=session.pk, items=_turn_out(result))
                # The session row stays locked until commit, so nothing else interleaves with this turn's events.
                rows = list(SessionEvent.objects.filter(session_id=session.pk, seq__gte=first.seq).order_by("seq"))
            _usage_write(session, actor.pk, result)  # with the running turn's reservation gone: counted once
            _audit(scope, session, intent, result)
            result.events = [stream.frame(seq=e.seq, kind=e.kind, ts=e.ts.isoformat(), body=e.body) for e in rows]
            if finish is not None:
                finish(result)
    except BaseException:
        _forget(result.turn_id)
        raise
    return result


def _admit(session: Session, actor_id: int) -> Admission:
    """The budgets' word on a model turn (locks them until this transaction commits); a model adapter that
    reports no usage reserves nothing."""
    adapter = get_model_adapter()
    model = str(getattr(adapter, "model", "")) if adapter.name != DeterministicAdapter.name else None
    return budget_admit(session=session, operator_id=actor_id, model=model)


def _usage_write(session: Session, actor_id: int, result: TurnResult) -> None:
    """The turn's model calls in the usage ledger, by the turn's actor: its answer (source ``turn:<id>``) and
    the summary of the earlier conversation it made, if any (``summary:<id>``; billed even when another turn's
    summary was stored instead)."""
    if result.usage is not None:
        step = _usage_step(f"turn:{result.turn_id}", result.model, result.usage)
        usage_record(session=session, steps=[step], operator_id=actor_id, provider=result.model_adapter)
    summary = result.summary
    if summary is not None and summary.usage is not None:
        step = _usage_step(f"summary:{result.turn_id}", summary.model, summary.usage)
        usage_record(session=session, steps=[step], operator_id=actor_id, provider=summary.adapter)


def _usage_step(ref: str, model: str, usage: ModelUsage) -> dict[str, Any]:
    return {
        "ref": ref,
        "model": model,
        "input": usage.input_tokens,
        "output": usage.output_tokens,
        "cache_read": usage.cache_read_tokens,
        "cache_write": usage.cache_write_tokens,
        "cost": usage.cost,
        "currency": usage.currency,
        "source": usage.source,
    }


def turn_run_approved(*, approval_id: str) -> TurnResult | None:
    """Run the turn held by the executed over-budget approval ``approval_id``, as its requester asked it, past
    the budget that held it. Its answer reaches the session's stream; a failure there is logged."""
    approval = (
        Approval.objects.select_related("tenant", "requester")
        .filter(pk=approval_id, action=OVER_BUDGET_ACTION, consumed_at__isnull=False)
        .first()
    )
    if approval is None or not isinstance(approval.parameters, dict) or approval.parameters.get("kind") != "turn":
        return None
    scope = Scope(
        tenant=approval.tenant,
        actor=approval.requester,
        channel=Channel(approval.channel),
        correlation_id=approval.correlation_id or "-",
        session=approval.target_id,
        roles=roles_for(user=approval.requester, tenant=approval.tenant),  # as they are now, not when asked
    )
    try:
        return turn_handle(
            scope=scope, session_id=approval.target_id, text=str(approval.parameters["text"]), over_budget_approved=True
        )
    except TessError as exc:
        logger.warning("the approved turn of approval %s was not run: %s", approval_id, exc.code)
        return None


def _summary_line(session: Session, result: TurnResult) -> list[tuple[stream.EventKind, Any]]:
    """Store the conversation summary this turn made, if no other turn stored one first, and its stream line
    (before the turn: the turn was answered from it)."""
    if result.summary is None:
        return []
    summary = conversation_summary_store(session_id=session.pk, pending=result.summary)
    if summary is None:
        return []
    return [
        (stream.EventKind.SYSTEM, stream.system_body(text=summarised_line(summary), code="conversation_summarised"))
    ]


def _claim(turn_id: str) -> bool:
    """Take the running turn's record in the transaction that writes it (gone means it was abandoned); say
    whether a Stop marked it. The row lock orders this with a Stop: one that comes after finds it gone."""
    if connection.vendor == "postgresql":  # one statement on every turn: the delete takes the row lock itself
        with hot_cursor() as cursor:
            cursor.execute(_CLAIM, [turn_id])
            row = cursor.fetchone()
        if row is None:
            raise TurnAbandoned()
        return row[0] is not None
    run = TurnRun.objects.select_for_update().filter(pk=turn_id).only("stop_requested_at").first()
    if run is None:
        raise TurnAbandoned()
    run.delete()
    return run.stop_requested_at is not None


_CLAIM = f"DELETE FROM {TurnRun._meta.db_table} WHERE turn_id = %s RETURNING stop_requested_at"  # noqa: S608


def _forget(turn_id: str) -> None:
    """A turn that failed in this process wrote nothing: drop its record (best effort; else it is swept)."""
    try:
        with transaction.atomic():
            TurnRun.objects.filter(pk=turn_id).delete()
    except DatabaseError:
        logger.warning("turn %s could not be forgotten; it is failed once it is abandoned", turn_id)


def turn_abandoned_after() -> int:
    """Seconds after which a running turn is taken for dead: never before its key may be taken over
    (``TESS_IDEMPOTENCY_LOCK_SECONDS``), nor while its model may still answer (its timeout and a margin for
    the reads around it), so a live turn is not written as failed."""
    return max(settings.TESS_IDEMPOTENCY_LOCK_SECONDS, settings.TESS_MODEL_TIMEOUT_SECONDS + 30)


ABANDONED_TEXT = "Nothing was done: this turn did not finish (the server handling it stopped). Send it again."


def turns_fail_abandoned(*, limit: int = 100) -> int:
    """Write the turns whose process died between accepting and writing them as failed (their ``turn.in``,
    a ``turn_failed`` line and a ``turn.out`` saying nothing was done) and forget them. Beat runs it; a turn
    whose first step saw such a turn runs it too, so a retry finds the failed attempt in the stream before its
    own."""
    stale = timezone.now() - timedelta(seconds=turn_abandoned_after())
    if not TurnRun.objects.filter(started_at__lt=stale).exists():
        return 0
    failed = 0
    for _ in range(limit):
        with transaction.atomic():
            run = TurnRun.objects.select_for_update(skip_locked=True).filter(started_at__lt=stale).first()
            if run is None:
                break
            turn_in = stream.turn_in_body(turn_id=run.turn_id, channel=run.channel, text=run.text)
            events_append(
                session_id=run.session_id,
                items=[
                    (stream.EventKind.TURN_IN, turn_in),
                    (stream.EventKind.SYSTEM, stream.system_body(text=ABANDONED_TEXT, code="turn_failed")),
                    (
                        stream.EventKind.TURN_OUT,
                        stream.turn_out_body(turn_id=run.turn_id, text=ABANDONED_TEXT, recalled_count=0),
                    ),
                ],
            )
            run.delete()
            failed += 1
    return failed


def _turn_in(scope: Scope, text: str, result: TurnResult) -> tuple[stream.EventKind, Any]:
    body = stream.turn_in_body(turn_id=result.turn_id, channel=scope.channel.value, text=text)
    return stream.EventKind.TURN_IN, body


def _turn_out(result: TurnResult) -> list[tuple[stream.EventKind, Any]]:
    items: list[tuple[stream.EventKind, Any]] = [
        (stream.EventKind.SYSTEM, stream.system_body(text=text, code=code)) for code, text in result.system_lines
    ]
    # turn.out's recalled_count is what grounded this reply ("Recalled: N operator notes" under it).
    grounded_count = result.recalled_count if result.grounded else 0
    body = stream.turn_out_body(
        turn_id=result.turn_id,
        text=result.reply,
        recalled_count=grounded_count,
        recalled=result.recalled_ids if result.grounded else [],
        stopped=result.stopped,
    )
    items.append((stream.EventKind.TURN_OUT, body))
    return items


def _audit(scope: Scope, session: Session, intent: Intent, result: TurnResult) -> None:
    """One audit row per decision, ids and codes only (never the turn's text)."""
    metadata: dict[str, Any] = {
        "turn_id": result.turn_id,
        "intent": intent.cls.value,
        "recalled_count": result.recalled_count,
        "grounded": result.grounded,
        "adapter": result.adapter or None,
        "fallback": any(code == "model_fallback" for code, _ in result.system_lines),
        "card_id": result.cards[0]["id"] if result.cards else None,
        "approval_id": result.approvals[0]["id"] if result.approvals else None,
        "handoff_id": result.handoffs[0]["id"] if result.handoffs else None,
        "reason": result.error.code if result.error is not None else None,
        "stopped": result.stopped,
    }
    record_audit(
        scope,
        action="turn.decided",
        target_type="session",
        target_id=str(session.pk),
        outcome="refused" if result.error is not None else intent.cls.value,
        metadata=metadata,
    )


# --- answers: conversation, status, diagnostics ---------------------------------------------------------


def live_state(scope: Scope, session: Session, intent: IntentClass) -> dict[str, Any]:
    """The authoritative state an answer rests on; status and diagnostics ask the session's provider now."""
    live: dict[str, Any] = {
        "session": {
            "id": str(session.pk),
            "title": session.title,
            "status": session.status,
            "provider_instance": session.provider_instance,
            "last_seq": session.last_seq,
        }
    }
    if intent not in (IntentClass.STATUS, IntentClass.DIAGNOSTICS):
        return live
    try:
        heartbeat_require_fresh(session.provider_instance)  # a stale instance is not asked: it may hang
        provider = get_provider(session.provider_instance)
        found = next((r for r in provider.list_sessions(scope) if r.ref.runtime_id == session.runtime_id), None)
        live["runtime"] = (
            {"status": "gone"}
            if found is None
            else {
                "status": found.status,
                "last_activity_at": found.last_activity_at.isoformat() if found.last_activity_at else None,
            }
        )
        if intent is IntentClass.DIAGNOSTICS:
            health, capabilities = provider.health(), provider.capabilities()
            live["diagnostics"] = {
                "kind": capabilities.kind,
                "instance": capabilities.instance,
                "healthy": health.ok,
                "operations": sorted(op.value for op in capabilities.operations),
            }
    except ProviderError as exc:
        live["runtime"] = {"error": exc.code}
    return live


def _unless_the_connection_is_gone(exc: Exception) -> None:
    """A read that may fail without failing the turn failed. If the connection can no longer go on (it was
    dropped, or a caller's transaction could not be rolled back to the savepoint), the turn cannot be written
    either: raise the typed 503 now, rather than fail later on a dead connection with an untyped error."""
    if connection.needs_rollback or not connection.is_usable():
        raise database_unavailable(exc) from exc


def _isolated() -> AbstractContextManager[Any]:
    """Around a read that may fail without failing the turn: a savepoint when a caller's transaction is open
    (so the failure does not abort it), else nothing, since the read may ask a memory service over the
    network (plast-mem) and no transaction may be open then."""
    return transaction.atomic() if connection.in_atomic_block else nullcontext()


def _recall(scope: Scope, result: TurnResult) -> Recall:
    try:
        with _isolated():
            recall = recall_for_prompt(scope)
    except MemoryUnavailable as exc:
        _unless_the_connection_is_gone(exc)
        result.system_lines.append(
            ("memory_unavailable", "Operator memory could not be read; this answer uses none of your notes.")
        )
        return Recall(block="", recalled_count=0, memory_scope="profile")
    result.memory_scope = recall.memory_scope
    result.recalled_count = recall.recalled_count
    result.recalled_ids = list(recall.memory_ids)
    return recall


def fallback_line(*, read: int, code: str) -> str:
    """The system line of a failed model turn (seed 002: it names the read and that it did not ground)."""
    if read:
        notes = "operator note was" if read == 1 else "operator notes were"
        return (
            f"The model failed ({code}). {read} {notes} read for this turn and did not ground this "
            "deterministic fallback answer."
        )
    return f"The model failed ({code}); this is the deterministic fallback answer."


def startup_context(scope: Scope, session: Session, *, first_turn: bool) -> list[str]:
    """The memory plugin's startup context (project truth, then retrieved records, each labelled as data),
    only at the session's first turn. Never fatal: without it the turn is answered from live state."""
    if not first_turn:
        return []
    try:
        with _isolated():
            context = operator_memory_plugin().startup_context(scope)
    except Exception as exc:
        _unless_the_connection_is_gone(exc)
        logger.warning("startup context of session %s could not be read; answering without it", session.pk)
        return []
    return [block.render() for block in context.blocks]


def _answer(
    scope: Scope,
    session: Session,
    intent: Intent,
    text: str,
    result: TurnResult,
    *,
    first_turn: bool,
    progress: ReplyProgress | None = None,
) -> None:
    adapter = get_model_adapter()
    # The deterministic adapter answers at once: no "thinking" to announce, no wait for a Stop to interrupt (one
    # that comes anyway is honoured when the turn is written), so neither costs a message or a query.
    waits = adapter.name != DeterministicAdapter.name
    deltas = ReplyDeltas(session_id=session.pk, turn_id=result.turn_id, progress=progress)
    if waits:
        deltas.start()
    try:
        # A Stop, on any node, sets ``cancel`` while this turn thinks (``turn_stop``).
        with stop_watch(result.turn_id, read=waits) as cancel:
            _think(scope, session, intent, text, result, adapter, deltas, cancel, first_turn=first_turn)
    finally:
        if progress is not None:
            progress.close()


def _think(
    scope: Scope,
    session: Session,
    intent: Intent,
    text: str,
    result: TurnResult,
    adapter: ModelAdapter,
    deltas: ReplyDeltas,
    cancel: CancelEvent,
    *,
    first_turn: bool,
) -> None:
    live = live_state(scope, session, intent.cls)
    recall = _recall(scope, result)
    retrieved = startup_context(scope, session, first_turn=first_turn)
    project = project_context(scope, session, text=text, live=live)  # plast-mem, with the workspace key
    if project.system_line is not None:
        result.system_lines.append(project.system_line)
    found = (
        retrieval_for_turn(scope, session, query=intent.query, recalled=recall.block)
        if intent.cls is IntentClass.RETRIEVAL
        else Found()
    )
    result.system_lines.extend(found.system_lines)
    retrieved = [*retrieved, *found.blocks]
    # The session's own earlier turns (summarised first if they outgrew their budget: a model call).
    conversation = conversation_build(session=session, adapter=adapter)
    result.summary = conversation.summary
    result.system_lines.extend(conversation.system_lines)
    prompt = prompt_assemble(
        text=text,
        memory_block=recall.block,
        retrieved=retrieved,
        live=live,
        conversation=conversation.messages,
        project_context=project.block,
    )
    # Only the deterministic adapter reads the standing initiative out of the notes it was given.
    initiative = standing_initiative_of(recall.block) if adapter.name == DeterministicAdapter.name else ""
    connection_release()  # the reads above are done: the model's wait holds no connection
    request = ModelRequest(
        prompt=prompt,
        intent=intent.cls.value,
        live=live,
        standing_initiative=initiative,
        on_delta=deltas,
        cancel=cancel,
        found=found.reply,
    )
    try:
        if cancel.is_set():  # stopped before the model was asked (an adapter that does not stream ignores it)
            raise ModelStopped("")
        reply = adapter.complete(request)
        deltas.flush()
        result.grounded = recall.recalled_count > 0
        result.usage, result.model, result.model_adapter = reply.usage, reply.model, adapter.name
    except ModelStopped as exc:
        deltas.flush()  # everything the model gave was shown: the turn keeps exactly that
        result.stopped = True
        result.grounded = recall.recalled_count > 0 and bool(exc.text)
        # What the stopped call had consumed (reported, or estimated once it had answered) is still spent.
        result.usage, result.model, result.model_adapter = exc.usage, str(getattr(adapter, "model", "")), adapter.name
        reply = ModelReply(text=exc.text, adapter=adapter.name, model="")
    except ModelError as exc:
        # A call refused before the model answered carries no usage; one broken or stopped half-way does, and a
        # stopped one that reported nothing is estimated from what it was sent and had produced.
        usage = exc.usage
        if usage is None and isinstance(exc, ModelStopped) and adapter.name != DeterministicAdapter.name:
            usage = usage_estimate(prompt.messages(), exc.text)
        result.usage, result.model, result.model_adapter = usage, str(getattr(adapter, "model", "")), adapter.name
        # The fallback reads no memory: its prompt has no memory block and it names no initiative.
        bare = prompt_assemble(
            text=text, retrieved=retrieved, live=live, conversation=conversation.messages, project_context=project.block
        )
        reply = DeterministicAdapter().complete(
            ModelRequest(prompt=bare, intent=intent.cls.value, live=live, found=found.reply_without_notes)
        )
        result.system_lines.append(("model_fallback", fallback_line(read=recall.recalled_count, code=exc.code)))
    result.reply, result.adapter = reply.text, reply.adapter


# --- actions: memory cards, approvals, hand-offs, refusals ------------------------------------------------


def _act(scope: Scope, session: Session, intent: Intent, text: str, result: TurnResult) -> None:
    try:
        if result.over_budget is not None:
            _over_budget(scope, session, result.over_budget, text, result)
        elif intent.cls is IntentClass.MEMORY:
            _memory_card(scope, session, intent, result)
        elif intent.cls is IntentClass.APPROVAL and intent.tool:
            _tool_request(scope, session, intent, result)
        elif intent.cls is IntentClass.APPROVAL:
            tool_policy_check(authority="human_approval", action=TERMINATE_ACTION)
            _terminate_request(scope, session, result)
        elif intent.cls is IntentClass.HANDOFF:
            tool_policy_check(authority="mos", action="mos.handoff")
            _handoff(scope, session, text, result)
        else:
            raise IntentUnsupported(intent.explanation or None, details={"reason": intent.reason})
    except TessError as exc:
        result.error = exc
        result.reply = f"Nothing was done: {exc.message}"


def _memory_card(scope: Scope, session: Session, intent: Intent, result: TurnResult) -> None:
    # seed 002: only text the operator typed becomes a value, and only through a card they confirm.
    card, reused = memory_propose_once(scope, data=intent.memory)
    payload = card.payload
    result.cards.append(
        {
            "id": str(card.id),
            "kind": card.kind,
            "status": card.status,
            "op": payload.get("op"),
            "category": payload.get("category"),
            "slot": payload.get("slot"),
        }
    )
    verb = {"forget_all": "forget all your notes", "forget": "forget that note", "correct": "correct that note"}
    what = verb.get(str(payload.get("op")), "remember that")
    if reused:
        result.reply = f"A card to {what} is already waiting for you: confirm or dismiss it under Cards."
        return
    event_append(
        session_id=session.pk,
        kind=stream.EventKind.CARD,
        body=stream.card_body(id=str(card.id), kind=card.kind, status=card.status),
    )
    result.reply = f"I parked a card to {what}. Nothing changes until you confirm it."


def _approval_entry(approval: Approval) -> dict[str, str]:
    """An approval the turn asked for, as the turn's result lists it."""
    return {
        "id": str(approval.id),
        "action": approval.action,
        "status": approval.status,
        "expires_at": approval.expires_at.isoformat(),
    }


def _terminate_request(scope: Scope, session: Session, result: TurnResult) -> None:
    # The same service as POST .../terminate/: owner or tenant admin only, exactly this runtime in the
    # approval's parameters, and the requester's pending approval reused rather than duplicated.
    approval = session_terminate(scope=scope, session_id=session.pk)
    result.approvals.append(_approval_entry(approval))
    result.reply = (
        f"Terminating this session needs an approver's decision. I asked for approval {approval.id}; it expires "
        f"at {approval.expires_at:%H:%M} UTC. Nothing happens until an approver approves."
    )


def _over_budget(scope: Scope, session: Session, budget: Budget, text: str, result: TurnResult) -> None:
    approval = over_budget_request(scope=scope, session=session, budget=budget, kind="turn", text=text)
    result.approvals.append(_approval_entry(approval))
    result.reply = (
        f"Budget {budget.name} has reached its limit, so this turn needs an approver's decision. I asked for "
        f"approval {approval.id}; it expires at {approval.expires_at:%H:%M} UTC. Nothing was sent to the model; "
        "once approved, this turn runs and its answer appears here."
    )


def _tool_request(scope: Scope, session: Session, intent: Intent, result: TurnResult) -> None:
    # The same policy as POST /api/v1/catalog/<id>/invoke/: schema, capability, then an approval.
    invocation = catalog_invoke(scope, tool_id=intent.action, data=intent.tool, session_id=str(session.pk))
    if invocation.error is not None:
        raise invocation.error
    assert invocation.approval is not None
    approval = invocation.approval
    result.approvals.append(_approval_entry(approval))
    result.reply = (
        f"{intent.action} needs an approver's decision. I asked for approval {approval.id}; it expires at "
        f"{approval.expires_at:%H:%M} UTC. Nothing happens until an approver approves."
    )


def _handoff(scope: Scope, session: Session, text: str, result: TurnResult) -> None:
    handoff = handoff_create(
        scope,
        session_id=str(session.pk),
        summary=text,
        payload={
            "request": text,
            "turn_id": result.turn_id,
            "session": {"id": str(session.pk), "title": session.title},
        },
    )
    result.handoffs.append({"id": str(handoff.pk), "status": handoff.status, "adapter": handoff.adapter or "none"})
    if settings.TESS_MOS_ADAPTER == "none":
        result.reply = (
            f"This is coding work for Mos, but no Mos endpoint is configured: hand-off {handoff.pk} is recorded "
            "and stays queued until one is."
        )
    else:
        result.reply = f"I handed this to Mos as hand-off {handoff.pk}; its result will appear in this session."


# --- hand-off results into the stream (registered with approvals_app in AppConfig.ready) ----------------


def post_handoff_event(handoff: Handoff) -> None:
    """Put a hand-off's change into its session's stream, inside the change's transaction."""
    if not handoff.session_id:
        return
    try:
        session_id = uuid.UUID(handoff.session_id)
    except ValueError:
        return
    if not Session.objects.filter(pk=session_id).exists():
        return
    event_append(
        session_id=session_id,
        kind=stream.EventKind.HANDOFF,
        body=stream.handoff_body(id=str(handoff.pk), status=handoff.status, result=result_text(handoff)),
    )
    if handoff.status in (Handoff.Status.COMPLETED, Handoff.Status.FAILED):
        capture_on_commit(
            session_id=session_id,
            source="handoff.completed",
            text=f"Hand-off {handoff.pk} {handoff.status}: {result_text(handoff)}",
        )
