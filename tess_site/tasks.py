"""Task plumbing shared by every app: queue only after commit, and the lease sweeper."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from celery import shared_task
from django.db import transaction
from kombu.exceptions import OperationalError as KombuOperationalError

from .celery import CORRELATION_HEADER
from .context import get_correlation_id
from .leases import registered_kinds, sweep

logger = logging.getLogger(__name__)


def enqueue_on_commit(task: Any, *args: Any) -> None:
    """Queue ``task(*args)`` once the current transaction commits (immediately outside one).

    Arguments are ids and small JSON values, never model objects. The correlation id travels in the
    task headers so the task's log lines and audit rows line up with the request that queued it.
    """
    correlation_id = get_correlation_id()
    transaction.on_commit(partial(_publish, task, list(args), correlation_id))


def _publish(task: Any, args: list[Any], correlation_id: str) -> None:
    """Send one wake-up. The work itself is already committed in PostgreSQL, so a broker that is down (a Redis
    restart) must not fail the request that made it: the wake-up is dropped and logged, and the periodic
    re-queue tasks find the due item in the database once the broker is back."""
    try:
        task.apply_async(args=args, headers={CORRELATION_HEADER: correlation_id})
    except KombuOperationalError as exc:
        logger.warning("broker unavailable, wake-up for %s dropped (the database re-queues it): %s", task.name, exc)


@shared_task(name="tess_site.tasks.sweep_expired_leases", ignore_result=True)
def sweep_expired_leases() -> int:
    """Periodic (Celery beat): put every expired lease back in line. Returns how many were re-queued."""
    total = 0
    for kind in registered_kinds():
        requeued = sweep(kind.model, kind.wake)
        if requeued:
            logger.warning("re-queued %d expired %s leases", len(requeued), kind.model._meta.label)
        total += len(requeued)
    return total
