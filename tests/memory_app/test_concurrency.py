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
from tests.waiting import wait_for

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


def test_inspections_wait_for_no_other_inspection_but_a_writer_waits_for_them(cast):
    """An inspection holds the writers' locks shared: a second inspection of the same operator reads at once
    while the first is still open, and a correction waits (in ``pg_locks``) until both are done."""
    from django.db import transaction

    from memory_app.locks import lock_categories_to_read
    from memory_app.policy import Category

    scope = scope_of(cast.owner, cast.acme)
    remember = {"op": "remember", "category": "preferences", "slot": "s", "value": "v0"}
    card_confirm(scope=scope, card_id=memory_propose(scope, data=remember).pk)
    correct = confirm_later(scope, {"op": "correct", "category": "preferences", "slot": "s", "value": "v1"})
    holding, release = threading.Event(), threading.Event()

    def open_inspection() -> None:
        try:
            with transaction.atomic():
                lock_categories_to_read(tenant_id=cast.acme.pk, operator_id=cast.owner.pk, categories=list(Category))
                holding.set()
                release.wait(60)
        finally:
            connection.close()

    done: dict[str, Any] = {}

    def run(name: str, call: Callable[[], Any]) -> threading.Thread:
        def target() -> None:
            try:
                done[name] = call()
            finally:
                connection.close()

        thread = threading.Thread(target=target)
        thread.start()
        return thread

    first = threading.Thread(target=open_inspection)
    first.start()
    try:
        assert holding.wait(30)
        second = run("inspection", lambda: memory_snapshot(scope=scope))
        second.join(30)
        assert not second.is_alive() and [r.value for r in done["inspection"].rows] == ["v0"]
        writer = run("correction", correct)

        def writer_waits() -> bool:
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
                return cursor.fetchone()[0] > 0

        wait_for(writer_waits)
        assert "correction" not in done
    finally:
        release.set()
        first.join(30)
    writer.join(30)
    assert done["correction"]["outcome"] == "revised"
    assert [r.value for r in memory_snapshot(scope=scope).rows] == ["v1"]
