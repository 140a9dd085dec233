"""Helpers for the audit tests: recording a few events, and tampering with the feed the way an intruder would."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from tess_site.audit.models import AuditEvent
from tess_site.audit.services import record_audit
from tess_site.scope import Scope
from tests.conftest import AUDIT_HEAD_TABLE, AUDIT_TABLE


@pytest.fixture
def record_events() -> Callable[..., list[AuditEvent]]:
    """Record ``count`` events in ``scope``'s tenant; target ids are ``prefix-0``, ``prefix-1``, …"""

    def make(scope: Scope, count: int, prefix: str = "doc", **fields: Any) -> list[AuditEvent]:
        fields.setdefault("action", "test.touch")
        fields.setdefault("target_type", "document")
        fields.setdefault("outcome", "ok")
        return [record_audit(scope, target_id=f"{prefix}-{i}", **fields) for i in range(count)]

    return make


def tamper(sql: str, params: list[Any] | None = None) -> None:
    """Run ``sql`` against the audit tables past their triggers, as the tables' owner could.

    Only for tests of the verifier: the change stays inside the test's transaction.
    """
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            cursor.execute(sql, params)
            return
        # Rows inserted earlier in the test's transaction leave deferred foreign-key checks pending, and
        # PostgreSQL will not ALTER a table with pending trigger events: run those checks now.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for table in (AUDIT_TABLE, AUDIT_HEAD_TABLE):
            cursor.execute(f'ALTER TABLE "{table}" DISABLE TRIGGER USER')
        cursor.execute(sql, params)
        for table in (AUDIT_TABLE, AUDIT_HEAD_TABLE):
            cursor.execute(f'ALTER TABLE "{table}" ENABLE TRIGGER USER')
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")


from tests.approvals_app.approval_fixtures import executed, mailed, request_touch  # noqa: E402, F401
