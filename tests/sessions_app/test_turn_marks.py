"""A turn's marks of being in flight (its idempotency key, its running record) commit without waiting for
the database's log flush; what it writes at the end waits as usual, and so covers the marks
(tess_site.transactions)."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection, transaction

from sessions_app.models import IdempotencyRecord, SessionEvent, TurnRun
from tess_site.transactions import commit_without_flush_wait
from tests.factories import SessionFactory

SET = "SET LOCAL synchronous_commit = off"


def synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return str(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_only_the_marking_transaction_commits_without_waiting():
    assert synchronous_commit() == "on"
    with transaction.atomic():
        commit_without_flush_wait()
        assert synchronous_commit() == "off"
    assert synchronous_commit() == "on"  # the next transaction waits again


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_it_refuses():
    with pytest.raises(AssertionError):
        commit_without_flush_wait()


@pytest.mark.django_db(transaction=True)
def test_a_turn_marks_without_waiting_and_writes_its_outcome_waiting(cast, api_as):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    statements: list[tuple[str, str]] = []  # (what was written, synchronous_commit of its transaction)
    tables = {
        IdempotencyRecord._meta.db_table: "key",
        TurnRun._meta.db_table: "run",
        SessionEvent._meta.db_table: "events",
    }
    looking = [False]

    def watch(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        written = next(
            (what for table, what in tables.items() if f"INTO {table} " in sql or f'INTO "{table}"' in sql), None
        )
        if written and not looking[0]:
            looking[0] = True
            try:
                statements.append((written, synchronous_commit()))
            finally:
                looking[0] = False
        return result

    client = api_as(cast.owner)
    with connection.execute_wrapper(watch):
        response = client.post(
            f"/api/v1/sessions/{session.pk}/turns/",
            {"text": "what am I working on?"},
            format="json",
            headers={"Idempotency-Key": uuid.uuid4().hex},
        )
    assert response.status_code == 200, response.content
    assert statements == [("key", "off"), ("run", "off"), ("events", "on")]
