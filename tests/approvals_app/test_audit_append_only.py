"""On PostgreSQL the database itself refuses to change or remove audit rows (migration 0002's triggers).

Each attempt runs in a savepoint (``transaction.atomic``) so the refused statement leaves the test's
transaction usable, and each test checks the row is still there, unchanged.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from tess_site.audit.models import AuditEvent
from tests.conftest import AUDIT_TABLE, scope_of

pytestmark = pytest.mark.postgres


@pytest.fixture
def event(cast, record_events) -> AuditEvent:
    return record_events(scope_of(cast.auditor, cast.acme), 1)[0]


def assert_untouched(event: AuditEvent) -> None:
    stored = AuditEvent.objects.get(pk=event.pk)
    assert (stored.outcome, stored.hash) == (event.outcome, event.hash)


def test_it_refuses_orm_queryset_update_on_postgres(event):
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).update(outcome="forged")
    assert_untouched(event)


def test_it_refuses_orm_save_of_an_existing_row_on_postgres(event):
    forged = AuditEvent.objects.get(pk=event.pk)
    forged.outcome = "forged"
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        forged.save()
    assert_untouched(event)


def test_it_refuses_orm_delete_on_postgres(event):
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.get(pk=event.pk).delete()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.all().delete()
    assert_untouched(event)


def test_it_refuses_raw_sql_update_on_postgres(event):
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f'UPDATE "{AUDIT_TABLE}" SET outcome = %s WHERE id = %s', ["forged", event.pk])
    assert_untouched(event)


def test_it_refuses_raw_sql_delete_on_postgres(event):
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f'DELETE FROM "{AUDIT_TABLE}" WHERE id = %s', [event.pk])
    assert_untouched(event)


# Transactional: inside the usual test transaction the freshly inserted row leaves deferred foreign-key checks
# pending, and PostgreSQL refuses TRUNCATE for that reason before the trigger is reached.
@pytest.mark.django_db(transaction=True)
def test_it_refuses_truncate_on_postgres(event):
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f'TRUNCATE "{AUDIT_TABLE}"')
    assert_untouched(event)


def test_it_still_accepts_appends_after_refusing_a_change_on_postgres(cast, event, record_events):
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).update(outcome="forged")
    later = record_events(scope_of(cast.auditor, cast.acme), 1)[0]
    assert (later.seq, later.prev_hash) == (2, event.hash)
