"""Mos hand-offs: coding work Tess hands to Mos, correlated with the turn that asked, and its results.

- ``handoff_create`` records a hand-off (``queued``), audits it, tells observers, and — when a Mos adapter
  is configured (``TESS_MOS_ADAPTER``) — queues its dispatch after commit. With ``none`` it stays queued.
- ``dispatch_handoff`` (Celery: an id in) claims the record with a lease, delivers it through the adapter
  and marks it ``dispatched``; transient failures retry with backoff, the lease sweeper re-queues a dead
  worker's claim, and ``requeue_due_handoffs`` wakes items whose retry is due.
- Results come back signed to ``POST /api/v1/handoffs/<id>/result/`` (webhook) or from the Redis result
  stream (``read_handoff_results``); ``handoff_result_apply`` moves the status forward only
  (queued → dispatched → acknowledged → completed | failed) and tells observers.

Observers (``register_handoff_observer``) are how a higher app hears about changes — sessions_app puts them
in the session stream — since approvals_app never imports it. They run inside the change's transaction.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

from celery import shared_task
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from rest_framework import status as http

from tess_site.audit.services import record_audit
from tess_site.errors import Conflict, InvalidInput, NotFound, TessError
from tess_site.leases import LeaseLost, LeaseState, claim, complete, fail, new_worker_id, requeue_due
from tess_site.scope import Channel, Scope
from tess_site.tasks import enqueue_on_commit

from .handoff_adapters import Envelope, MosRefused, MosResult, MosTransient, configured_adapter, redis_adapter
from .models import Handoff

logger = logging.getLogger(__name__)

Status = Handoff.Status
_ORDER = {Status.QUEUED: 0, Status.DISPATCHED: 1, Status.ACKNOWLEDGED: 2, Status.COMPLETED: 3, Status.FAILED: 3}
RESULT_STATUSES = (Status.ACKNOWLEDGED, Status.COMPLETED, Status.FAILED)
SUMMARY_MAX = 200
RESULT_MAX_BYTES = 65536
RETRY_BASE_SECONDS = 5


class SignatureInvalid(TessError):
    code = "signature_invalid"
    status_code = http.HTTP_403_FORBIDDEN
    default_message = "The signature does not match the body; nothing was changed."


class HandoffTransitionInvalid(Conflict):
    code = "handoff_transition_invalid"
    default_message = "A hand-off's status only moves forward; nothing was changed."


class HandoffNotFound(NotFound):
    code = "not_found"
    default_message = "No such hand-off."


HandoffObserver = Callable[[Handoff], None]
_observers: list[HandoffObserver] = []


def register_handoff_observer(observer: HandoffObserver) -> None:
    """Call ``observer(handoff)`` inside the transaction of every change (created, dispatched, results)."""
    if observer not in _observers:
        _observers.append(observer)


def _observe(handoff: Handoff) -> None:
    for observer in list(_observers):
        observer(handoff)


def _system_scope(handoff: Handoff) -> Scope:
    return Scope(
        tenant=handoff.tenant,
        actor=None,
        channel=Channel.SYSTEM,
        correlation_id=handoff.correlation_id or "-",
        session=handoff.session_id,
    )


def result_text(handoff: Handoff) -> str:
    """A short line of the result for the stream: Mos's ``summary`` if it sent one, else its JSON, cut."""
    result = handoff.result
    if result is None:
        return ""
    if isinstance(result, dict) and isinstance(result.get("summary"), str):
        return str(result["summary"])[:2000]
    return json.dumps(result, sort_keys=True)[:2000]


# --- writes ---------------------------------------------------------------------------------------------


def handoff_create(scope: Scope, *, session_id: str | None, summary: str, payload: dict[str, Any]) -> Handoff:
    """Record a hand-off for the scope's actor and queue its dispatch if a Mos adapter is configured."""
    from django.conf import settings

    if scope.actor is None:
        raise InvalidInput("system scopes cannot hand work to Mos")
    if not summary.strip():
        raise InvalidInput("A hand-off needs a summary.", details={"field": "summary"})
    adapter = "" if settings.TESS_MOS_ADAPTER == "none" else settings.TESS_MOS_ADAPTER
    with transaction.atomic():
        handoff = Handoff.objects.create(
            tenant=scope.tenant,
            requester=scope.actor,
            session_id=session_id,
            correlation_id=scope.correlation_id,
            summary=summary.strip()[:SUMMARY_MAX],
            payload=payload,
            adapter=adapter,
        )
        record_audit(
            scope,
            action="handoff.created",
            target_type="handoff",
            target_id=str(handoff.pk),
            outcome="queued",
            metadata={"session_id": session_id, "adapter": adapter or "none"},
        )
        _observe(handoff)
        if adapter:
            enqueue_on_commit(dispatch_handoff, str(handoff.pk))
    return handoff


def _envelope(handoff: Handoff) -> Envelope:
    return Envelope(
        id=str(handoff.pk),
        correlation_id=handoff.correlation_id,
        tenant=handoff.tenant.slug,
        session_id=handoff.session_id,
        summary=handoff.summary,
        payload=dict(handoff.payload or {}),
    )


def _mark_failed(handoff: Handoff, *, worker: str, code: str) -> None:
    with transaction.atomic():
        Handoff.objects.filter(pk=handoff.pk, lease_owner=worker).update(
            state=LeaseState.FAILED, last_error=code[:200], lease_owner="", lease_expires_at=None
        )
        _advance(handoff.pk, Status.FAILED, result={"error": code}, via="dispatch")


def handoff_dispatch(*, handoff_id: object, worker: str) -> bool:
    """Deliver one hand-off if this worker can claim it; True when this call dispatched it.

    Mos dedupes on the hand-off id, so a worker that delivered and then lost its lease before recording it
    does not make the next worker's delivery a second piece of work.
    """
    item = claim(Handoff, pk=handoff_id, worker=worker)
    if item is None:
        return False
    handoff = Handoff.objects.select_related("tenant").get(pk=item.pk)
    adapter = configured_adapter()
    if adapter is None:  # the adapter was switched off after queueing: leave it queued for a later one
        Handoff.objects.filter(pk=item.pk, lease_owner=worker).update(
            state=LeaseState.PENDING, lease_owner="", lease_expires_at=None
        )
        return False
    try:
        adapter.dispatch(_envelope(handoff))
    except MosTransient as exc:
        fail(item, worker=worker, error=exc.code, retry_in_seconds=RETRY_BASE_SECONDS * 2 ** min(item.attempts, 6))
        if item.attempts >= item.max_attempts:
            with transaction.atomic():
                _advance(handoff.pk, Status.FAILED, result={"error": exc.code}, via="dispatch")
        raise
    except MosRefused as exc:
        _mark_failed(handoff, worker=worker, code=exc.code)
        return False
    finally:
        adapter.close()
    with transaction.atomic():
        if not complete(item, worker=worker):
            raise LeaseLost(f"hand-off {item.pk}: lease lost after dispatching")
        _advance(handoff.pk, Status.DISPATCHED, result=None, via=adapter.name)
    return True


def _advance(handoff_id: uuid.UUID | str, status: str, *, result: Any, via: str) -> Handoff:
    """Move a hand-off's status forward (idempotent for a repeat of the current status); observed, audited."""
    handoff = Handoff.objects.select_for_update(of=("self",)).select_related("tenant").get(pk=handoff_id)
    if handoff.status == status:
        return handoff
    if _ORDER[Status(status)] <= _ORDER[Status(handoff.status)]:
        if status == Status.DISPATCHED:  # a result overtook the dispatch record: nothing to move
            return handoff
        raise HandoffTransitionInvalid(details={"status": handoff.status, "requested": status})
    handoff.status = status
    if result is not None:
        handoff.result = result
    handoff.updated_at = timezone.now()
    handoff.save(update_fields=["status", "result", "updated_at"])
    record_audit(
        _system_scope(handoff),
        action=f"handoff.{status}",
        target_type="handoff",
        target_id=str(handoff.pk),
        outcome="ok",
        metadata={"via": via, "session_id": handoff.session_id},
    )
    _observe(handoff)
    return handoff


def handoff_result_apply(*, handoff_id: object, status: str, result: Any, via: str) -> Handoff:
    """Record a result Mos sent back (signature or stream already verified by the caller)."""
    if status not in RESULT_STATUSES:
        raise InvalidInput(
            "status must be acknowledged, completed or failed.", details={"fields": {"status": list(RESULT_STATUSES)}}
        )
    if result is not None and len(json.dumps(result)) > RESULT_MAX_BYTES:
        raise InvalidInput(f"A result is at most {RESULT_MAX_BYTES} bytes of JSON.", details={"field": "result"})
    try:
        pk = uuid.UUID(str(handoff_id))
    except ValueError as exc:
        raise HandoffNotFound() from exc
    with transaction.atomic():
        if not Handoff.objects.filter(pk=pk).exists():
            raise HandoffNotFound()
        return _advance(pk, status, result=result, via=via)


def handoff_results_read() -> int:
    """Apply every waiting result from the Redis result stream (the ``redis`` adapter)."""

    def apply(entry: MosResult) -> None:
        try:
            handoff_result_apply(handoff_id=entry.handoff_id, status=entry.status, result=entry.result, via="redis")
        except (InvalidInput, NotFound, HandoffTransitionInvalid) as exc:
            # Not retryable: acknowledging it keeps one bad entry from blocking the group.
            logger.warning("Mos result %s refused: %s", entry.entry_id, exc.code)

    adapter = redis_adapter()
    try:
        return adapter.read_results(apply)
    finally:
        adapter.close()


def wake_handoff(pk: object) -> None:
    """The lease sweeper's wake-up for a re-queued hand-off."""
    enqueue_on_commit(dispatch_handoff, str(pk))


def handoffs_requeue_due() -> int:
    """Wake hand-offs whose retry is due (their task gave up or never ran), while queued for an adapter."""
    where = Q(status=Status.QUEUED) & ~Q(adapter="")
    return requeue_due(Handoff, wake_handoff, where=where, settle_seconds=5)


# --- tasks: ids in, one service call -------------------------------------------------------------------


@shared_task(name="approvals_app.handoffs.dispatch_handoff", bind=True, ignore_result=True, max_retries=5)
def dispatch_handoff(self: Any, handoff_id: str) -> bool:
    try:
        return handoff_dispatch(handoff_id=handoff_id, worker=new_worker_id())
    except MosTransient as exc:
        if self.request.is_eager:  # in-process: the requeue beat (or the next request) tries again
            return False
        # The item became due again after the same backoff (``fail`` above); a second later it is claimable.
        countdown = RETRY_BASE_SECONDS * 2 ** min(self.request.retries + 1, 6) + 1
        raise self.retry(exc=exc, countdown=countdown) from exc


@shared_task(name="approvals_app.handoffs.read_handoff_results", ignore_result=True)
def read_handoff_results() -> int:
    return handoff_results_read()


@shared_task(name="approvals_app.handoffs.requeue_due_handoffs", ignore_result=True)
def requeue_due_handoffs() -> int:
    return handoffs_requeue_due()
