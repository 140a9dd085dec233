"""Concurrency on PostgreSQL with real parallel connections: ceilings and the single standing initiative hold."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from approvals_app.cards import card_confirm
from memory_app.models import OperatorMemory, OperatorMemoryHistory
from memory_app.selectors import memory_snapshot
from memory_app.services import memory_propose
from tests.conftest import scope_of

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def in_parallel(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run every call on its own thread and connection, released together; return results or exceptions."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[index] = call()
        except Exception as exc:
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def confirm_later(scope, data: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    card = memory_propose(scope, data=data)
    return lambda: card_confirm(scope=scope, card_id=card.pk)[1]


def test_thirty_simultaneous_preference_writes_leave_exactly_twelve_rows(cast):
    scope = scope_of(cast.owner, cast.acme)
    calls = [
        confirm_later(scope, {"op": "remember", "category": "preferences", "value": f"pref {i}"}) for i in range(30)
    ]

    results = in_parallel(calls)

    outcomes = sorted(r["outcome"] if isinstance(r, dict) else repr(r) for r in results)
    assert outcomes.count("created") == 12
    assert outcomes.count("refused") == 18
    assert {r["error"]["code"] for r in results if r["outcome"] == "refused"} == {"category_full"}
    assert OperatorMemory.objects.filter(operator=cast.owner, category="preferences").count() == 12


def test_twenty_simultaneous_standing_initiatives_leave_one_current_row_and_a_consistent_history(cast):
    scope = scope_of(cast.owner, cast.acme)
    calls = [
        confirm_later(scope, {"op": "remember", "category": "standing_initiative", "value": f"initiative {i}"})
        for i in range(20)
    ]

    results = in_parallel(calls)

    assert sorted(r["outcome"] for r in results) == ["created"] + ["revised"] * 19
    [current] = OperatorMemory.objects.filter(operator=cast.owner, category="standing_initiative")
    history = list(OperatorMemoryHistory.objects.filter(memory_id=current.memory_id).order_by("revision"))
    assert current.revision == 20 and current.predecessor_revision == 19
    assert [h.revision for h in history] == list(range(1, 20))
    assert all(h.successor_revision == h.revision + 1 for h in history)
    assert all(h.predecessor_revision == (h.revision - 1 if h.revision > 1 else None) for h in history)
    values = {h.value for h in history} | {current.value}
    assert values == {f"initiative {i}" for i in range(20)}


def test_a_card_confirmed_twice_at_once_is_applied_once(cast):
    scope = scope_of(cast.owner, cast.acme)
    card = memory_propose(scope, data={"op": "remember", "category": "preferences", "value": "only once"})

    results = in_parallel([lambda: card_confirm(scope=scope, card_id=card.pk) for _ in range(8)])

    applied = [r for r in results if isinstance(r, tuple)]
    refused = [r for r in results if not isinstance(r, tuple)]
    assert len(applied) == 1 and applied[0][1]["outcome"] == "created"
    assert {getattr(r, "code", None) for r in refused} == {"card_already_decided"}
    assert OperatorMemory.objects.count() == 1


def test_inspection_during_corrections_never_sees_a_half_applied_correction(cast):
    scope = scope_of(cast.owner, cast.acme)
    card_confirm(
        scope=scope,
        card_id=memory_propose(
            scope, data={"op": "remember", "category": "preferences", "slot": "s", "value": "v0"}
        ).pk,
    )
    writers = [
        confirm_later(scope, {"op": "correct", "category": "preferences", "slot": "s", "value": f"v{i}"})
        for i in range(1, 11)
    ]

    def inspect() -> bool:
        snapshot = memory_snapshot(scope=scope)
        [row] = snapshot.rows
        return len(snapshot.history) == row.revision - 1

    results = in_parallel([*writers, *[inspect for _ in range(10)]])

    assert all(r is True for r in results[10:]), results[10:]
