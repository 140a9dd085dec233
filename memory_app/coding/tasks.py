"""Celery: ingestion of an export into plast-mem, retried with backoff on transient failures."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from tess_site.tasks import enqueue_on_commit

from .ingest import MAX_ATTEMPTS, coding_memory_ingest, coding_memory_requeue_due


@shared_task(
    bind=True,
    name="memory_app.coding.tasks.ingest_coding_memory_export",
    acks_late=True,
    max_retries=MAX_ATTEMPTS,
    ignore_result=True,
)
def ingest_coding_memory_export(self: Any, export_id: str) -> str:
    """Ids in, one service call inside. The service records every failure and counts attempts.

    One attempt per run. On a worker a transient failure is retried later with the service's backoff (the
    periodic sweep also wakes it then, should this retry be lost; only one of them sends). Run eagerly (the
    embedded mode without a worker, and tests) the task never raises into whoever queued it: the export
    waits out its backoff in the database and the embedded pump's sweep sends it when due.
    """
    outcome = coding_memory_ingest(export_id=export_id)
    if self.request.is_eager:
        return outcome.status
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status


@shared_task(name="memory_app.coding.tasks.requeue_due_coding_exports", ignore_result=True)
def requeue_due_coding_exports() -> int:
    """Periodic: wake exports whose ingestion is due (after a backoff, or a lost wake-up)."""
    return coding_memory_requeue_due(lambda export_id: enqueue_on_commit(ingest_coding_memory_export, export_id))
