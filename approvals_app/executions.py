"""Executing approved actions exactly once: a leased item per approval, run by a Celery task.

The Celery tasks that run and re-queue items are defined here, beside what they call and what queues
them. ``queue_execution`` creates the item in the deciding transaction and queues the task after commit. The
task claims the item's lease (``tess_site.leases``), and in one transaction the registered executor
consumes the approval (a conditional UPDATE: once per approval, ever) and performs the action, and the
item is completed while the lease is still held. A worker that dies leaves its lease to expire; the
sweeper re-queues the item and another worker finishes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from celery import shared_task
from django.conf import settings
from django.db import transaction

from tess_site.errors import TessError
from tess_site.leases import LeaseLost, LeaseState, claim, complete, fail, new_worker_id, requeue_due
from tess_site.tasks import enqueue_on_commit

from .approvals import action_executor, approval_record_result, system_scope_of
from .models import Approval, ApprovalExecution

logger = logging.getLogger(__name__)


_UNDO: ContextVar[list[Callable[[], None]] | None] = ContextVar("tess_execution_undo", default=None)


def undo_on_failure(undo: Callable[[], None]) -> None:
    """For executors: run ``undo`` if this execution does not commit after all.

    An effect outside the database (a process started, a runtime created) does not roll back with the
    execution's transaction. Register its undoing right after making it: if a later step fails, the lease
    turns out lost, or the commit fails, ``undo`` runs (newest first, each failure logged), so a retried
    execution does not leave a second, orphaned effect behind.
    """
    pending = _UNDO.get()
    if pending is None:
        raise RuntimeError("undo_on_failure belongs inside an executor run by execution_run")
    pending.append(undo)


@contextmanager
def _undone_unless_committed() -> Iterator[None]:
    pending: list[Callable[[], None]] = []
    token = _UNDO.set(pending)
    try:
        yield
    except BaseException:
        for undo in reversed(pending):
            try:
                undo()
            except Exception:
                logger.exception("undoing an effect of a failed execution failed")
        raise
    finally:
        _UNDO.reset(token)


def queue_execution(approval: Approval) -> ApprovalExecution:
    """Create the execution item of a just-approved approval and queue its task after commit."""
    item = ApprovalExecution.objects.create(approval=approval)
    enqueue_on_commit(execute_approval, item.pk)
    return item


def wake_execution(pk: object) -> None:
    """The lease sweeper's wake-up for a re-queued execution item."""
    enqueue_on_commit(execute_approval, pk)


def _finish_failed(item: ApprovalExecution, *, worker: str, approval: Approval, code: str) -> None:
    """Record a final failure: the item is done (no retry) and the approval says ``failed``."""
    scope = system_scope_of(approval)
    with transaction.atomic():
        if not complete(item, worker=worker):
            raise LeaseLost(f"approval execution {item.pk}: lease lost")
        approval_record_result(scope, approval=approval, executed=False, result={"error": {"code": code}})


def execution_run(*, item_id: int, worker: str, retry_in_seconds: int = 5) -> bool:
    """Run one execution item if this worker can claim it. True when this call executed the action."""
    item = claim(ApprovalExecution, pk=item_id, worker=worker)
    if item is None:
        return False
    approval = Approval.objects.select_related("tenant").get(pk=item.approval_id)
    executor = action_executor(approval.action)
    if executor is None:
        _finish_failed(item, worker=worker, approval=approval, code="no_executor")
        return False
    scope = system_scope_of(approval)
    try:
        # The commit happens when the atomic block exits, inside the undo guard: a failed commit undoes too.
        with _undone_unless_committed(), transaction.atomic():
            result = executor(scope, approval)
            if not complete(item, worker=worker):
                raise LeaseLost(f"approval execution {item.pk}: lease lost after executing")
            approval.refresh_from_db()
            approval_record_result(scope, approval=approval, executed=True, result=dict(result or {}))
        return True
    except LeaseLost:
        raise
    except TessError as exc:
        if exc.status_code != 503:  # a typed refusal is final; 503 (unavailable) is worth another attempt
            approval.refresh_from_db()
            _finish_failed(item, worker=worker, approval=approval, code=exc.code)
            return False
        state = fail(item, worker=worker, error=exc.code, retry_in_seconds=retry_in_seconds)
    except Exception as exc:
        logger.exception("approval execution %s failed", item.pk)
        state = fail(item, worker=worker, error=exc.__class__.__name__, retry_in_seconds=retry_in_seconds)
    if state == LeaseState.FAILED:
        with transaction.atomic():
            approval.refresh_from_db()
            approval_record_result(
                scope, approval=approval, executed=False, result={"error": {"code": "execution_error"}}
            )
    return False


def execution_requeue_due() -> int:
    """Wake items pending and due again after a transient failure (their task already returned), and items
    never attempted a lease's length after they were due: their wake-up was lost (the broker was down).

    Periodic (Celery beat, ``approvals-requeue-due``). Waking an item twice is harmless: only one claim wins.
    """
    return requeue_due(ApprovalExecution, wake_execution, unattempted_grace_seconds=settings.TESS_LEASE_SECONDS)


@shared_task(name="approvals_app.tasks.execute_approval", ignore_result=True)
def execute_approval(item_id: int) -> bool:
    """Execute one approved action, if no other worker holds its execution item."""
    return execution_run(item_id=item_id, worker=new_worker_id())


@shared_task(name="approvals_app.tasks.requeue_due_executions", ignore_result=True)
def requeue_due_executions() -> int:
    """Periodic: wake execution items that are due again after a transient failure."""
    return execution_requeue_due()
