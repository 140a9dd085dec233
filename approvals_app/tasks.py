"""Celery tasks of the approvals app: ids in, one service call inside, queued after commit.

The execution tasks live in ``executions.py`` (which queues them); this module holds the rest.
"""

from __future__ import annotations

from celery import shared_task

from .approvals import approvals_expire_lapsed


@shared_task(name="approvals_app.tasks.expire_lapsed_approvals", ignore_result=True)
def expire_lapsed_approvals() -> int:
    """Periodic: write requests left pending past their expiry as expired, audited and announced."""
    return approvals_expire_lapsed()
