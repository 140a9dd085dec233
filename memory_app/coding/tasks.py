"""Celery: ingestion of an export into plast-mem, retried with backoff on transient failures."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from .ingest import MAX_ATTEMPTS, coding_memory_ingest


@shared_task(
    bind=True,
    name="memory_app.coding.tasks.ingest_coding_memory_export",
    acks_late=True,
    max_retries=MAX_ATTEMPTS,
    ignore_result=True,
)
def ingest_coding_memory_export(self: Any, export_id: str) -> str:
    """Ids in, one service call inside. The service records every failure and counts attempts.

    On a worker a transient failure is retried later with the service's backoff. Run eagerly (the
    embedded default without a worker, and tests) there is no later, and a raised ``Retry`` would reach
    whoever exported: the remaining attempts run at once, in-process, and the task never raises.
    """
    outcome = coding_memory_ingest(export_id=export_id)
    if self.request.is_eager:
        while outcome.retry_in is not None:
            outcome = coding_memory_ingest(export_id=export_id)
        return outcome.status
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)
    return outcome.status
