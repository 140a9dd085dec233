"""A turn in three short steps: no transaction, lock or database connection held while the model thinks, and
a process that dies at any boundary leaves the turn failed and retryable, never half written (PostgreSQL)."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.test import override_settings
from django.utils import timezone

from approvals_app.models import Card
from sessions_app.models import IdempotencyRecord, IdempotencyState, Session, SessionEvent, TurnRun
from tests.factories import SessionFactory
from tests.outside_transaction import no_call_in_transaction
from tests.providers_app.chat_standin import ChatStandIn, running_chat_standin
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def chat_standin() -> Iterator[ChatStandIn]:
    with running_chat_standin() as standin:
        yield standin
        standin.release.set()


@pytest.fixture
def session(cast) -> Session:
    return SessionFactory.create(owner=cast.owner, tenant=cast.acme)


def model_settings(standin: ChatStandIn, model: str) -> dict[str, Any]:
    return {
        "TESS_MODEL_ADAPTER": "openai_compatible",
        "TESS_MODEL": model,
        "TESS_MODEL_BASE_URL": standin.base_url,
        "TESS_MODEL_API_KEY": "sk-test",
        "TESS_MODEL_TIMEOUT_SECONDS": 30,
    }


def turn(client, session: Session, text: str, key: str) -> Any:
    return client.post(
        f"/api/v1/sessions/{session.pk}/turns/", {"text": text}, format="json", headers={"Idempotency-Key": key}
    )


def stream(session: Session) -> list[tuple[str, Any]]:
    return [(e.kind, e.body) for e in SessionEvent.objects.filter(session=session).order_by("seq")]


def in_thread(target: Any) -> threading.Thread:
    def run() -> None:
        try:
            target()
        finally:
            connection.close()  # this thread's own connection; the test database is dropped at the end

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_model_turn_asks_the_model_over_http_with_no_transaction_open(cast, api_as, session, chat_standin):
    with override_settings(**model_settings(chat_standin, "gpt-5.6-sol")), no_call_in_transaction():
        response = turn(api_as(cast.owner), session, "summarize the queue", uuid.uuid4().hex)
    assert response.status_code == 200, response.json()
    assert response.json()["reply"] == "stand-in answer to: summarize the queue"
    assert [kind for kind, _ in stream(session)] == ["turn.in", "turn.out"]
    assert not TurnRun.objects.exists()


def test_the_guard_sees_a_model_call_inside_a_transaction(cast, api_as, session, chat_standin):
    """The guard above can fail: the same turn run inside a caller's transaction is reported."""
    from django.db import transaction

    from sessions_app.gateway import turn_handle
    from tests.conftest import scope_of

    with (
        override_settings(**model_settings(chat_standin, "gpt-5.6-sol")),
        pytest.raises(pytest.fail.Exception, match="inside a transaction"),
        no_call_in_transaction(),
        transaction.atomic(),
    ):
        turn_handle(scope=scope_of(cast.owner, cast.acme), session_id=str(session.pk), text="hello")


def test_while_the_model_thinks_no_connection_is_held_and_a_retry_is_409(
    cast, api_as, session, chat_standin, monkeypatch
):
    # Without a pool and without persistent connections, the request closes its connection after step 1.
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    key, answers = uuid.uuid4().hex, {}

    def connected() -> dict[int, tuple[str, str]]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid, state, query FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            return {pid: (state, query) for pid, state, query in cursor.fetchall()}

    # Connections open before the turn (another thread of this test process, say) are not the turn's.
    before = set(connected())

    def others() -> list[tuple[str, str]]:
        return [row for pid, row in connected().items() if pid not in before]

    with override_settings(**model_settings(chat_standin, "held")):
        first = in_thread(lambda: answers.update(first=turn(api_as(cast.owner), session, "hello", key)))
        assert wait_for(lambda: chat_standin.requests, timeout=30)

        # A connection closed just before the model was asked may take a moment to leave pg_stat_activity;
        # one the turn holds stays for as long as the model thinks (here: until the test releases it).
        held = wait_for(lambda: not others(), timeout=10) or others()
        assert held is True, f"the thinking turn still holds a database connection: {held}"
        assert TurnRun.objects.filter(session=session).count() == 1
        retry = turn(api_as(cast.owner), session, "hello", key)
        assert retry.status_code == 409 and retry.json()["error"]["code"] == "idempotency_request_in_flight"
        assert stream(session) == []  # nothing of the turn is written while it thinks
        chat_standin.release.set()
        first.join(timeout=60)
    assert answers["first"].status_code == 200, answers["first"].json()
    replay = turn(api_as(cast.owner), session, "hello", key)
    assert replay.status_code == 200 and replay["Idempotency-Replayed"] == "true"
    assert replay.json() == answers["first"].json()
    assert [kind for kind, _ in stream(session)] == ["turn.in", "turn.out"]


def test_eight_turns_think_at_once_on_a_pool_of_two_connections(cast, api_as, session, chat_standin, monkeypatch):
    """Django's pool (psycopg_pool): ``close()`` puts the connection back. With two connections in the pool,
    eight turns can only all be waiting on the model together if none of them holds one while it waits."""
    clients = [api_as(cast.owner) for _ in range(8)]
    connection.close()
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    monkeypatch.setitem(
        connections.settings["default"], "OPTIONS", {"pool": {"min_size": 0, "max_size": 2, "timeout": 10}}
    )
    answers: dict[int, Any] = {}

    def ask(n: int) -> None:
        answers[n] = turn(clients[n], session, f"question {n}", f"key-{n}")

    try:
        with override_settings(**model_settings(chat_standin, "held")):
            threads = [in_thread(lambda n=n: ask(n)) for n in range(8)]
            assert wait_for(lambda: len(chat_standin.requests) == 8, timeout=60), (
                f"only {len(chat_standin.requests)} turns reached the model together"
            )
            chat_standin.release.set()
            for thread in threads:
                thread.join(timeout=60)
        assert sorted(n for n, answer in answers.items() if answer.status_code == 200) == list(range(8))
        assert [kind for kind, _ in stream(session)] == ["turn.in", "turn.out"] * 8
    finally:
        connection.close()
        connection.close_pool()


# --- a process that dies at a boundary ----------------------------------------------------------------------


def die_during_turn(client, session: Session, text: str, key: str, boundary: str) -> None:
    """Run the turn in a forked process that exits abruptly at ``boundary`` (no cleanup, no response)."""
    connections.close_all()  # the child opens its own connection
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            from sessions_app import gateway
            from sessions_app.api import turn_views

            def die(*args: Any, **kwargs: Any) -> Any:
                os._exit(17)

            if boundary == "accepted":  # step 1 committed; about to think (answers) or write (actions)
                gateway.connection_release = die
                gateway._claim = die
            elif boundary == "writing":  # step 3's events appended, not committed
                gateway._audit = die
            elif boundary == "written":  # step 3 committed; the response never leaves
                turn_views.Response = die  # type: ignore[misc,assignment]
            turn(client, session, text, key)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 17, "the child did not reach the boundary"


def age_everything() -> None:
    """As if the lock and the abandonment times had passed."""
    long_ago = timezone.now() - timedelta(hours=1)
    IdempotencyRecord.objects.update(created_at=long_ago)
    TurnRun.objects.update(started_at=long_ago)


@pytest.mark.parametrize(
    ("text", "boundary"),
    [
        ("hello", "accepted"),
        ("hello", "writing"),
        ("remember that I prefer rebases", "accepted"),
        ("remember that I prefer rebases", "writing"),
    ],
)
def test_a_turn_whose_process_dies_before_writing_is_failed_then_retryable(cast, api_as, session, text, boundary):
    client, key = api_as(cast.owner), uuid.uuid4().hex
    die_during_turn(client, session, text, key, boundary)
    # Never half written: no event, no card; the key and the turn are still in flight.
    assert stream(session) == [] and not Card.objects.exists()
    assert IdempotencyRecord.objects.get(key=key).state == IdempotencyState.IN_FLIGHT
    (abandoned,) = TurnRun.objects.all()
    retry = turn(client, session, text, key)
    assert retry.status_code == 409 and retry.json()["error"]["code"] == "idempotency_request_in_flight"

    age_everything()
    retry = turn(client, session, text, key)
    assert retry.status_code == 200, retry.json()
    events = stream(session)
    # The dead attempt is in the stream as a failed turn (its turn.in, why, its turn.out), then the retry.
    caused = [] if text == "hello" else ["card"]
    assert [kind for kind, _ in events] == ["turn.in", "system", "turn.out", "turn.in", *caused, "turn.out"]
    assert events[0][1]["turn_id"] == abandoned.turn_id == events[2][1]["turn_id"]
    assert events[1][1]["code"] == "turn_failed" and "Nothing was done" in events[2][1]["text"]
    assert events[3][1]["turn_id"] == retry.json()["turn_id"] != abandoned.turn_id
    assert Card.objects.count() == (0 if text == "hello" else 1)
    assert not TurnRun.objects.exists()
    assert turn(client, session, text, key)["Idempotency-Replayed"] == "true"


def test_a_turn_whose_process_dies_after_writing_is_replayed_not_taken_twice(cast, api_as, session):
    client, key = api_as(cast.owner), uuid.uuid4().hex
    die_during_turn(client, session, "hello", key, "written")
    assert [kind for kind, _ in stream(session)] == ["turn.in", "turn.out"]
    assert not TurnRun.objects.exists()
    retry = turn(client, session, "hello", key)
    assert retry.status_code == 200 and retry["Idempotency-Replayed"] == "true"
    assert [e["kind"] for e in retry.json()["events"]] == ["turn.in", "turn.out"]
    assert len(stream(session)) == 2


def test_a_turn_taken_for_dead_while_it_thinks_writes_nothing(cast, api_as, session, chat_standin):
    """A turn still thinking when it is written as failed (a hung process) finds its record gone: 503, and
    the stream keeps only the failure."""
    key, answers = uuid.uuid4().hex, {}
    with override_settings(**model_settings(chat_standin, "held")):
        first = in_thread(lambda: answers.update(first=turn(api_as(cast.owner), session, "hello", key)))
        assert wait_for(lambda: chat_standin.requests, timeout=30)
        TurnRun.objects.update(started_at=timezone.now() - timedelta(hours=1))
        from sessions_app.gateway import turns_fail_abandoned

        assert turns_fail_abandoned() == 1
        chat_standin.release.set()
        first.join(timeout=60)
    assert answers["first"].status_code == 503 and answers["first"]["Retry-After"]
    assert answers["first"].json()["error"]["code"] == "turn_abandoned"
    assert [kind for kind, _ in stream(session)] == ["turn.in", "system", "turn.out"]
    assert not IdempotencyRecord.objects.filter(key=key).exists()  # a 5xx frees the key for the retry
