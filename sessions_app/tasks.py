"""Celery tasks of the sessions app: ids in, one service call inside, queued after commit.

Claims are conditional updates (leases for inbox items, a skip-locked row lock for the pump), so a task
that runs twice does its work once. Only ``ProviderUnavailable`` is retried, with backoff.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from celery import shared_task
from django.conf import settings

from providers_app.contract import ProviderUnavailable
from tess_site.leases import new_worker_id

from . import services
from .gateway import turn_run_approved, turns_fail_abandoned
from .idempotency import idempotency_purge
from .lifecycle import capture_deliver, capture_requeue_due
from .outbox import outbox_deliver
from .wakeups import DELIVER_CAPTURE_ITEM, DELIVER_INBOX_ITEM, DELIVER_OUTBOX_ITEM, RUN_APPROVED_TURN

logger = logging.getLogger(__name__)

MAX_RETRIES = 6


def _backoff(retries: int) -> int:
    return int(min(60, 2 ** (retries + 1)))


@shared_task(bind=True, name=DELIVER_INBOX_ITEM, ignore_result=True, max_retries=MAX_RETRIES)
def deliver_inbox_item(self: Any, item_id: int) -> bool:
    """Send one queued message to its runtime, if no other worker holds it."""
    delay = _backoff(self.request.retries or 0)
    try:
        return services.inbox_deliver(item_id=item_id, worker=new_worker_id(), retry_in_seconds=delay)
    except ProviderUnavailable as exc:
        if self.request.is_eager:
            return False  # requeue_due_work picks it up once it is due again
        raise self.retry(exc=exc, countdown=delay) from exc


@shared_task(bind=True, name="sessions_app.tasks.pump_session", ignore_result=True, max_retries=3)
def pump_session(self: Any, session_id: str) -> int:
    """Turn new runtime output of one session into ``output`` events."""
    try:
        return services.session_pump(session_id=uuid.UUID(session_id))
    except ProviderUnavailable as exc:
        if self.request.is_eager:
            return 0
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries or 0)) from exc


@shared_task(name="sessions_app.tasks.pump_sessions", ignore_result=True)
def pump_sessions() -> int:
    """Periodic (beat): one pump task per running session; a stale one expires instead of piling up."""
    expires = max(1.0, settings.TESS_PUMP_INTERVAL_MS / 1000 * 4)
    ids = services.running_session_ids()
    for session_id in ids:
        pump_session.apply_async(args=(str(session_id),), expires=expires)
    return len(ids)


@shared_task(name="sessions_app.tasks.requeue_due_work", ignore_result=True)
def requeue_due_work() -> int:
    """Periodic: wake inbox items and lifecycle captures that are pending and due again (after a transient
    failure, or a wake-up lost with the process that committed them)."""
    return services.inbox_requeue_due() + capture_requeue_due()


@shared_task(name="sessions_app.tasks.purge_idempotency_records", ignore_result=True)
def purge_idempotency_records() -> int:
    """Periodic: idempotency keys are kept 24 hours, then forgotten."""
    return idempotency_purge()


@shared_task(name="sessions_app.tasks.fail_abandoned_turns", ignore_result=True)
def fail_abandoned_turns() -> int:
    """Periodic: a turn whose process died before writing it is written into its stream as failed."""
    return turns_fail_abandoned()


@shared_task(name=DELIVER_OUTBOX_ITEM, ignore_result=True)
def deliver_outbox_item(item_id: int) -> bool:
    """Push one outbox item to its channel, if no other worker holds it."""
    return outbox_deliver(item_id=item_id, worker=new_worker_id())


@shared_task(name=DELIVER_CAPTURE_ITEM, ignore_result=True)
def deliver_capture_item(item_id: int) -> bool:
    """Put one lifecycle capture into its person's operational memory, if no other worker holds it."""
    return capture_deliver(item_id=item_id, worker=new_worker_id())


@shared_task(name=RUN_APPROVED_TURN, ignore_result=True)
def run_approved_turn(approval_id: str) -> None:
    """Run the turn an over-budget approval held (``over_budget``), once its execution has committed."""
    turn_run_approved(approval_id=approval_id)
