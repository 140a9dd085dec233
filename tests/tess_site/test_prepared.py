"""Prepared hot statements (``tess_site.rows.hot_cursor``): PostgreSQL keeps the plans of the statements
every turn makes, the ORM never prepares, and ``DB_PREPARE_THRESHOLD`` turns it off or is refused when bad."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection
from django.test import override_settings

from approvals_app.cards import card_confirm
from memory_app.services import memory_propose
from sessions_app.models import Session
from tess_site.settings.derived import databases
from tess_site.settings.env import ImproperlyConfiguredEnv
from tests.conftest import scope_of
from tests.factories import SessionFactory
from tests.sessions_app.test_turns import turn


def _prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.postgres
@pytest.mark.django_db
# Every turn marks its notes' last use here (by default only a minute after the last mark), so the third turn
# runs that statement too.
@override_settings(TESS_MEMORY_LAST_USE_SECONDS=0)
def test_a_turns_statements_are_prepared_on_the_connection_and_its_answers_stay_right(cast, api_as):
    scope = scope_of(cast.owner, cast.acme)
    for value in ("EVE_EVERYWHERE Phase 5", "answer in short lines"):
        category = "standing_initiative" if "Phase" in value else "preferences"
        card = memory_propose(scope, data={"op": "remember", "category": category, "value": value})
        card_confirm(scope=scope, card_id=card.id)
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    client = api_as(cast.owner)
    connection.connection.execute("DEALLOCATE ALL")  # whatever earlier tests left on this connection
    assert _prepared() == []
    bodies = []
    for _ in range(3):  # the default threshold is 2: the third turn runs on prepared plans
        response = turn(client, session, "what am I working on?")
        assert response.status_code == 200, response.content
        bodies.append(response.json())
    prepared = "\n".join(_prepared())
    for statement in (
        "pg_try_advisory_xact_lock",  # the idempotency key
        "UPDATE sessions_app_idempotencyrecord",  # the stored response
        "UPDATE sessions_app_session SET last_seq",  # the events
        "FROM memory_app_memoryswitch",  # recall
        "UPDATE memory_app_operatormemory SET last_used_at",  # recall's last use
        "FROM approvals_app_auditchainhead",  # the audit head
        "INSERT INTO approvals_app_auditevent",  # the audit row
    ):
        assert statement in prepared, statement
    for _ in range(3):
        assert Session.objects.filter(pk=session.pk).count() == 1
    assert '"sessions_app_session"' not in "\n".join(_prepared())  # the ORM binds on the client: never prepared
    # Prepared or not, every turn is answered from the same notes and its events follow on.
    assert all("standing initiative (from your notes): EVE_EVERYWHERE Phase 5" in body["reply"] for body in bodies)
    assert [body["memory"]["recalled_count"] for body in bodies] == [2, 2, 2]
    seqs = [event["seq"] for body in bodies for event in body["events"]]
    assert seqs == list(range(seqs[0], seqs[0] + 6))


def _database_options(env: dict[str, str]) -> dict[str, object]:
    return dict(databases(env, Path("unused.sqlite3"))["default"].get("OPTIONS", {}))


@pytest.mark.parametrize(("raw", "expected"), [(None, 2), ("", 2), ("0", 0), ("7", 7), ("off", None), ("OFF", None)])
def test_the_threshold_comes_from_db_prepare_threshold_and_off_turns_it_off(raw, expected):
    env = {"DATABASE_URL": "postgres://tess@127.0.0.1:5432/tess"}
    if raw is not None:
        env["DB_PREPARE_THRESHOLD"] = raw
    assert _database_options(env)["prepare_threshold"] == expected


@pytest.mark.parametrize("raw", ["two", "-1"])
def test_a_bad_threshold_is_refused_at_start_naming_the_variable(raw):
    with pytest.raises(ImproperlyConfiguredEnv, match="DB_PREPARE_THRESHOLD"):
        _database_options({"DATABASE_URL": "postgres://tess@127.0.0.1:5432/tess", "DB_PREPARE_THRESHOLD": raw})


def test_sqlite_has_no_threshold():
    assert "prepare_threshold" not in _database_options({})
