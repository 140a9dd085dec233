"""Twenty turns at once against a require_approval budget at 99 %: on real PostgreSQL, from real threads, each
asking the chat stand-in over HTTP. The spend may pass the limit by no more than the turns already running
when it was reached; every other turn is held in an approval and never reaches the model."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import F, Sum
from django.test import override_settings

from sessions_app.budgets import budget_save, budget_state
from sessions_app.gateway import TurnResult, turn_handle
from sessions_app.models import Budget, TurnRun, UsageRecord
from tests.conftest import Cast, scope_of
from tests.factories import SessionFactory
from tests.providers_app.chat_standin import ChatStandIn, running_chat_standin

TURNS = 20


@pytest.fixture
def chat_standin() -> Iterator[ChatStandIn]:
    with running_chat_standin() as standin:
        yield standin


def tokens_of(rows: object) -> int:
    total = rows.aggregate(  # type: ignore[attr-defined]
        t=Sum(F("input_tokens") + F("output_tokens") + F("cache_read_tokens") + F("cache_write_tokens"))
    )["t"]
    return int(total or 0)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_turns_at_99_percent_overshoot_by_at_most_the_turns_already_running(
    cast: Cast, chat_standin: ChatStandIn
):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    scope = scope_of(cast.owner, cast.acme)
    settings = {
        "TESS_MODEL_ADAPTER": "openai_compatible",
        "TESS_MODEL": "gpt-5.6-sol",
        "TESS_MODEL_BASE_URL": chat_standin.base_url,
        "TESS_MODEL_TIMEOUT_SECONDS": 30,
        "TESS_MODEL_STREAM": True,
    }
    with override_settings(**settings):
        turn_handle(scope=scope, session_id=str(session.pk), text="a first question")
        spent = tokens_of(UsageRecord.objects.filter(session=session))
        limit = int(spent / Decimal("0.99"))  # the first turn's tokens are 99 % of the budget
        budget = budget_save(
            scope=scope_of(cast.admin_user, cast.acme),
            budget=Budget(
                tenant=cast.acme,
                name="session tokens",
                session=session,
                period="day",
                metric="tokens",
                limit=Decimal(limit),
                action="require_approval",
            ),
            created=True,
        )
        assert budget_state(budget, time_zone="UTC").percent == 99

        barrier = threading.Barrier(TURNS)
        results: list[TurnResult] = []
        errors: list[BaseException] = []

        def ask(n: int) -> None:
            try:
                barrier.wait()
                results.append(turn_handle(scope=scope, session_id=str(session.pk), text=f"question {n}"))
            except BaseException as exc:
                errors.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=ask, args=(n,)) for n in range(TURNS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert errors == []
    answered = [r for r in results if not r.approvals]
    held = [r for r in results if r.approvals]
    # Every turn reserves the largest recent turn: the 1 % left fits one turn in flight, never more.
    assert (len(answered), len(held)) == (1, TURNS - 1)
    assert len(chat_standin.requests) == 2  # the first question and the one admitted turn
    assert {a["action"] for r in held for a in r.approvals} == {"session.over_budget"}
    running = UsageRecord.objects.filter(source_ref__in=[f"turn:{r.turn_id}" for r in answered])
    final = tokens_of(UsageRecord.objects.filter(session=session))
    assert final - limit <= tokens_of(running)
    assert not TurnRun.objects.exists()  # every reservation went with its turn
    assert budget_state(budget, time_zone="UTC").reserved == 0
