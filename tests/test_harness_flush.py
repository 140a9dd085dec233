"""The harness's reset between transactional tests (``tests/conftest.py``): every table emptied, whether by DELETE or
by TRUNCATE, and the audit tables guarded again afterwards."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from sessions_app.models import Session
from tess_site.accounts.models import Tenant
from tess_site.audit.models import AuditEvent
from tess_site.audit.services import record_audit
from tests.conftest import AUDIT_TABLE, KEPT_BY_FLUSH, TRUNCATE_FROM_ROWS, scope_of
from tests.factories import SessionFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _rows_left() -> dict[str, int]:
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    counts = {}
    with connection.cursor() as cursor:
        for table in tables:
            if table not in KEPT_BY_FLUSH:
                cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
                counts[table] = cursor.fetchone()[0]
    return {table: count for table, count in counts.items() if count}


def test_the_flush_empties_small_and_large_tables_and_the_audit_guard_holds_after_it(cast):
    SessionFactory.create(owner=cast.owner, tenant=cast.acme)  # rows that refer to others: deletes in any order
    Tenant.objects.bulk_create(Tenant(slug=f"t{n}", name=f"T{n}") for n in range(TRUNCATE_FROM_ROWS + 1))
    record_audit(scope_of(cast.owner, cast.acme), action="test.touch", target_type="document", outcome="ok")
    assert Session.objects.exists() and AuditEvent.objects.exists()

    # As TransactionTestCase calls it after each test (the command alone would also reset sequences).
    call_command("flush", interactive=False, verbosity=0, reset_sequences=False)

    assert _rows_left() == {}
    # The audit tables' triggers are on again: neither a TRUNCATE nor a DELETE of an event gets through.
    tenant, user = Tenant.objects.create(slug="acme", name="Acme"), User.objects.create(username="owner")
    record_audit(scope_of(user, tenant), action="test.touch", target_type="document", outcome="ok")
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {AUDIT_TABLE}")
    with pytest.raises(DatabaseError), transaction.atomic():
        AuditEvent.objects.all().delete()
    assert AuditEvent.objects.count() == 1
