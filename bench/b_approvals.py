"""Approvals: 50 concurrent decision POSTs on one approval, each from its own thread and connection.

Exactly one decision lands and the action executes exactly once (checked every round; the run stops
otherwise). The figure is the wall time of the whole burst beside the same burst of ``GET /healthz``.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from django.core import mail
from django.db import connection
from django.test import Client
from django.test.utils import override_settings
from django.utils import timezone

from approvals_app import approvals
from approvals_app.approvals import approval_consume, approval_request, register_action_executor
from approvals_app.delivery import link_url
from approvals_app.models import Approval, ApprovalExecution
from bench.common import ROUNDS, Row
from tess_site.accounts import services as accounts
from tess_site.accounts.selectors import roles_for
from tess_site.scope import Channel, Role, Scope

BURST = 50
ACTION = "bench.noop"


def _burst(calls: list[Callable[[], Any]]) -> tuple[float, list[Any]]:
    """Run every call at once, one thread each; the wall time from release to the last answer, in ms."""
    barrier = threading.Barrier(len(calls) + 1)
    results: list[Any] = [None] * len(calls)

    def run(i: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[i] = call()
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return (time.perf_counter() - started) * 1000, results


def run() -> list[Row]:
    tenant = accounts.tenant_create(slug=f"bench-appr-{timezone.now():%H%M%S%f}")
    requester, _ = accounts.user_ensure(username=f"bench-req-{tenant.pk}", password="bench-pass-1234")
    approver, _ = accounts.user_ensure(username=f"bench-appr-{tenant.pk}", password="bench-pass-1234")
    approver.email = "approver@bench.test"
    approver.save(update_fields=["email"])
    accounts.membership_grant(tenant=tenant, user=requester, role=Role.OPERATOR)
    accounts.membership_grant(tenant=tenant, user=approver, role=Role.APPROVER)
    scope = Scope(
        tenant=tenant,
        actor=requester,
        channel=Channel.WEB,
        correlation_id="bench-approvals-1",
        roles=roles_for(user=requester, tenant=tenant),
    )
    executed: list[str] = []

    def execute(scope: Scope, approval: Approval) -> dict[str, Any]:
        approval_consume(approval_id=approval.pk, action=ACTION, target_type="bench", target_id=approval.target_id)
        executed.append(str(approval.pk))
        return {"ok": True}

    register_action_executor(ACTION, execute)
    clients = []
    for _ in range(BURST):
        client = Client(enforce_csrf_checks=True)
        client.force_login(approver)
        client.get("/admin/")
        clients.append((client, client.cookies["csrftoken"].value))
    health = Client()

    decide_ms: list[float] = []
    health_ms: list[float] = []
    admin_ms: list[float] = []
    try:
        with override_settings(TESS_APPROVAL_RATE="100000/min"):
            for round_ in range(ROUNDS):
                health_ms.append(_burst([lambda: health.get("/healthz").status_code for _ in range(BURST)])[0])
                admin_ms.append(_burst([partial(_admin_index, client) for client, _ in clients])[0])
                mail.outbox = []
                approval = approval_request(
                    scope, action=ACTION, target_type="bench", target_id=f"r{round_}", parameters={}, session_id=None
                )
                path = _path_of_token(approval)
                elapsed, statuses = _burst([partial(_approve, client, csrf, path) for client, csrf in clients])
                decide_ms.append(elapsed)
                runs = ApprovalExecution.objects.filter(approval=approval, state="done").count()
                mine = executed.count(str(approval.pk))
                if sorted(statuses) != [200] + [409] * (BURST - 1) or mine != 1 or runs != 1:
                    raise AssertionError(f"round {round_}: statuses {sorted(set(statuses))}, executions {mine}")
    finally:
        approvals._executors.pop(ACTION, None)
    return [
        Row(
            f"{BURST} concurrent decisions → 1 execution",
            f"{BURST} concurrent GET /healthz",
            statistics.median(health_ms),
            statistics.median(decide_ms),
            unit="ms",
        ),
        Row(
            f"{BURST} concurrent decisions → 1 execution",
            f"{BURST} concurrent GET /admin/ (logged in)",
            statistics.median(admin_ms),
            statistics.median(decide_ms),
            unit="ms",
        ),
    ]


def _admin_index(client: Client) -> int:
    return int(client.get("/admin/").status_code)


def _approve(client: Client, csrf: str, path: str) -> int:
    return int(client.post(path, {"decision": "approve", "csrfmiddlewaretoken": csrf}).status_code)


def _path_of_token(approval: Approval) -> str:
    """The approver's link path, read from the e-mail the request sent (the token is stored nowhere)."""
    import re

    prefix = str(link_url("TOKEN")).removesuffix("TOKEN/")
    for message in mail.outbox:
        found = re.search(re.escape(prefix) + r"([A-Za-z0-9_-]+)/", str(message.body))
        if found:
            return f"/approvals/{found.group(1)}/"
    raise AssertionError(f"no link was mailed for {approval.pk}")
