"""Read-only fleet diagnostics, safe to run in an incident: provider health, queue depth, session counts.

Incident-safe means the diagnostics never become the incident:

- every check has its own deadline (``TESS_DIAGNOSTICS_CHECK_SECONDS``): a provider that hangs is reported
  ``timeout`` and the answer still comes back;
- every database read runs under ``SET LOCAL statement_timeout`` (PostgreSQL;
  ``TESS_DIAGNOSTICS_STATEMENT_TIMEOUT_MS``) and counts at most ``COUNT_CAP`` rows of indexed work queues
  (``SELECT COUNT(*) FROM (… LIMIT n)``), so a backlog of millions costs what a backlog of ten thousand does.

``provider_health`` and ``queue_depth`` are registered here; session counts live with the sessions, so
sessions_app registers that operation (and the inbox/outbox depth behind the durable inbox/state hooks).
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import QuerySet

from approvals_app.models import ApprovalExecution, Handoff
from tess_site.leases import LeaseState
from tess_site.scope import Scope

from .capabilities import CapabilityName, capability
from .contract import ProviderUnavailable
from .health import instance_health
from .heartbeat import heartbeats_apply
from .registry import instances_for_tenant

logger = logging.getLogger(__name__)

COUNT_CAP = 10_000
QUERY_CANCELED = "57014"  # PostgreSQL's SQLSTATE for a statement cancelled by its timeout
OPEN_STATES = (LeaseState.PENDING, LeaseState.LEASED)

# Checks that outlive their deadline keep running here, never in the request's thread.
_pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="tess-diagnostics")


class DiagnosticsTimeout(ProviderUnavailable):
    code = "diagnostics_timeout"
    default_message = "A diagnostic read ran past its statement timeout; nothing heavier was tried."


@contextmanager
def bounded_reads() -> Iterator[None]:
    """Run the enclosed reads in a savepoint under the diagnostics statement timeout (PostgreSQL).

    ``SET LOCAL`` lasts until the end of the outermost transaction, so the previous value is put back on
    the way out: a caller's later statements keep their own timeout. A read cancelled by the timeout is
    ``diagnostics_timeout`` (503), and the caller's transaction stays usable.
    """
    with transaction.atomic():
        if connection.vendor != "postgresql":
            yield
            return
        with connection.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            row = cursor.fetchone()
            previous = str(row[0]) if row else "0"
            cursor.execute("SELECT set_config('statement_timeout', %s, true)", [_ms(settings)])
        try:
            with transaction.atomic():
                yield
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) == QUERY_CANCELED:
                raise DiagnosticsTimeout() from exc
            raise
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('statement_timeout', %s, true)", [previous])


def _ms(config: Any) -> str:
    return f"{int(config.TESS_DIAGNOSTICS_STATEMENT_TIMEOUT_MS)}ms"


def capped_count(rows: QuerySet[Any]) -> dict[str, Any]:
    """``{"count": n, "capped": bool}``: counts at most ``COUNT_CAP`` rows."""
    count = rows[:COUNT_CAP].count()
    return {"count": count, "capped": count >= COUNT_CAP}


def provider_health(scope: Scope, **_: Any) -> dict[str, Any]:
    """Health of each provider instance the tenant may use, each under its own deadline."""
    deadline = float(settings.TESS_DIAGNOSTICS_CHECK_SECONDS)
    names = instances_for_tenant(scope.tenant.slug)
    futures = {name: _pool.submit(instance_health, name) for name in names}
    instances: dict[str, Any] = {}
    for name, future in futures.items():
        try:
            instances[name] = future.result(timeout=deadline)
        except concurrent.futures.TimeoutError:
            instances[name] = {"ok": False, "kind": "", "detail": {"error": "timeout"}, "heartbeat_at": None}
    heartbeats_apply(instances)
    return {"ok": all(entry["ok"] for entry in instances.values()), "instances": instances}


def queue_depth(scope: Scope, **_: Any) -> dict[str, Any]:
    """Open (pending or leased) durable work of the tenant: inbox, outbox, approval executions, hand-offs.

    Inbox and outbox belong to the sessions; they are read through the durable inbox/state hooks, so this
    fails closed (501) where those hooks are not installed.
    """
    inbox_outbox = capability(CapabilityName.DURABLE_INBOX_STATE).operation("depth")(scope)
    with bounded_reads():
        executions = capped_count(
            ApprovalExecution.objects.filter(state__in=OPEN_STATES, approval__tenant_id=scope.tenant.pk)
        )
        handoffs = capped_count(Handoff.objects.filter(state__in=OPEN_STATES, tenant_id=scope.tenant.pk))
    return {**inbox_outbox, "approval_executions": executions, "handoffs": handoffs, "cap": COUNT_CAP}
