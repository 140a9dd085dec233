"""Approval metrics: transitions counted after commit, and the number waiting read at scrape time.

Registered in ``ApprovalsConfig.ready()``; the metric objects live in ``tess_site.metrics``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from tess_site.metrics import APPROVAL_TRANSITIONS

from .models import Approval

# The waiting count stops here: a scrape never counts more rows than this, however large the backlog.
PENDING_COUNT_CAP = 10_000
STATEMENT_TIMEOUT_MS = 500


def count_transition(approval: Approval) -> None:
    """An approval observer (``register_approval_observer``): runs inside the change's transaction."""
    if approval.execution in (Approval.Execution.EXECUTED, Approval.Execution.FAILED):
        state = str(approval.execution)
    elif approval.status == Approval.Status.PENDING:
        state = "requested"
    else:
        state = str(approval.status)
    transaction.on_commit(lambda: APPROVAL_TRANSITIONS.labels(to=state).inc())


@contextmanager
def _statement_timeout() -> Iterator[None]:
    """PostgreSQL: bound the statements inside (call within a transaction); the previous limit comes back
    afterwards, also when the transaction is an outer one's savepoint."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('statement_timeout')")
        previous = cursor.fetchone()[0]
        cursor.execute("SELECT set_config('statement_timeout', %s, true)", [str(STATEMENT_TIMEOUT_MS)])
    yield
    # Not in a ``finally``: after an error the surrounding atomic block's rollback undoes the setting anyway.
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('statement_timeout', %s, true)", [previous])


def collect_pending() -> Iterable[Metric]:
    """``tess_approvals_pending``: undecided, unexpired requests, capped at ``PENDING_COUNT_CAP``."""
    waiting = Approval.objects.filter(status=Approval.Status.PENDING, expires_at__gt=timezone.now())
    with transaction.atomic(), _statement_timeout():
        count = waiting.order_by()[:PENDING_COUNT_CAP].count()
    yield GaugeMetricFamily(
        "tess_approvals_pending",
        f"Approval requests waiting for a decision (counted up to {PENDING_COUNT_CAP}).",
        value=count,
    )
