"""Celery tasks of the approvals app: ids in, one service call inside, queued after commit."""

from __future__ import annotations

from celery import shared_task

from tess_site.leases import new_worker_id


@shared_task(name="approvals_app.tasks.execute_approval", ignore_result=True)
def execute_approval(item_id: int) -> bool:
    """Execute one approved action, if no other worker holds its execution item."""
    from .executions import execution_run

    return execution_run(item_id=item_id, worker=new_worker_id())


@shared_task(name="approvals_app.tasks.expire_lapsed_approvals", ignore_result=True)
def expire_lapsed_approvals() -> int:
    """Periodic: write requests left pending past their expiry as expired, audited and announced."""
    from .approvals import approvals_expire_lapsed

    return approvals_expire_lapsed()


@shared_task(name="approvals_app.tasks.requeue_due_executions", ignore_result=True)
def requeue_due_executions() -> int:
    """Periodic: wake execution items that are due again after a transient failure."""
    from .executions import execution_requeue_due

    return execution_requeue_due()
