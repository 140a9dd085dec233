"""On PostgreSQL the database itself refuses to change or remove audit rows (migration 0002's triggers).

Each attempt runs in a savepoint (``transaction.atomic``) so the refused statement leaves the test's
transaction usable, and each test checks the row is still there, unchanged.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction
from rest_framework.test import APIClient

from tess_site.accounts.models import PersonalToken
from tess_site.audit.models import AuditChainHead, AuditEvent
from tess_site.audit.services import AuditUnavailable, record_audit
from tests.approvals_app.conftest import tamper
from tests.conftest import AUDIT_HEAD_TABLE, AUDIT_TABLE, scope_of

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


# The chain head: created empty, advanced one event at a time by record_audit, and otherwise left alone.


def head_of(event: AuditEvent) -> tuple[int, str]:
    return AuditChainHead.objects.values_list("last_seq", "last_hash").get(tenant_id=event.tenant_id)


@pytest.mark.parametrize(
    "statement",
    [
        f'DELETE FROM "{AUDIT_HEAD_TABLE}"',
        f"UPDATE \"{AUDIT_HEAD_TABLE}\" SET last_seq = 0, last_hash = ''",
        f"UPDATE \"{AUDIT_HEAD_TABLE}\" SET last_hash = 'forged'",
        f'UPDATE "{AUDIT_HEAD_TABLE}" SET last_seq = last_seq + 5',
    ],
    ids=["delete", "rewind", "rewrite-hash", "skip-ahead"],
)
def test_it_refuses_changing_or_removing_the_chain_head_on_postgres(event, statement):
    before = head_of(event)
    with pytest.raises(DatabaseError, match="chain head"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement)
    assert head_of(event) == before == (1, event.hash)


@pytest.mark.django_db(transaction=True)
def test_it_refuses_truncating_the_chain_head_on_postgres(event):
    with pytest.raises(DatabaseError, match="chain head"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f'TRUNCATE "{AUDIT_HEAD_TABLE}"')
    assert head_of(event) == (1, event.hash)


def test_a_missing_head_makes_audited_writes_a_typed_503_and_changes_nothing(cast, event):
    tamper(f'DELETE FROM "{AUDIT_HEAD_TABLE}"')
    with pytest.raises(AuditUnavailable), transaction.atomic():
        record_audit(scope_of(cast.auditor, cast.acme), action="test.write", target_type="doc", outcome="ok")

    # Issuing a token is audited: the API answers the typed 503, and no token is made.
    response = APIClient().post(
        "/api/v1/auth/token/", {"username": "owner", "password": "owner-pass-1234"}, format="json"
    )
    assert response.status_code == 503, response.json()
    assert response.json()["error"]["code"] == "audit_unavailable" and response["Retry-After"]
    assert not PersonalToken.objects.filter(user=cast.owner).exists()
    assert AuditEvent.objects.filter(tenant=cast.acme).count() == 1


def test_a_head_that_fell_behind_makes_audited_writes_a_typed_503(cast, event):
    tamper(f"UPDATE \"{AUDIT_HEAD_TABLE}\" SET last_seq = 0, last_hash = ''")
    with pytest.raises(AuditUnavailable), transaction.atomic():
        record_audit(scope_of(cast.auditor, cast.acme), action="test.write", target_type="doc", outcome="ok")
    assert AuditEvent.objects.filter(tenant=cast.acme).count() == 1
