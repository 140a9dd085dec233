"""Turns of one operator recall the same notes at once on PostgreSQL, each on its own connection, and none
waits for another's row locks (the turn's transaction keeps what recall marked locked until it commits)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from memory_app.models import OperatorMemory
from memory_app.recall import recall_for_prompt
from tests.conftest import scope_of
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

NOTES = 5
TURNS = 8


def _lock_waits(pids: list[int]) -> list[tuple[int, str]]:
    """Backends among ``pids`` waiting for a lock right now."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, wait_event FROM pg_stat_activity WHERE pid = ANY(%s) AND wait_event_type = 'Lock'", [pids]
        )
        return list(cursor.fetchall())


def test_concurrent_turns_of_one_operator_recall_without_waiting_on_each_others_locks(cast, remember):
    for i in range(NOTES):
        remember(f"preference {i}")
    started = timezone.now()
    held, release = threading.Event(), threading.Event()
    pids: list[int] = []
    counts: dict[int, Any] = {}
    done: set[int] = set()

    def turn(index: int, hold: bool) -> None:
        try:
            with transaction.atomic():  # the turn's transaction, as the gateway runs recall in it
                pids.append(connection.connection.info.backend_pid)
                counts[index] = recall_for_prompt(scope_of(cast.owner, cast.acme)).recalled_count
                if hold:
                    held.set()
                    release.wait(timeout=120)
        except Exception as exc:
            counts[index] = exc
        finally:
            done.add(index)
            connection.close()

    holder = threading.Thread(target=turn, args=(0, True))
    holder.start()
    try:
        assert held.wait(timeout=60), counts
        others = [threading.Thread(target=turn, args=(i, False)) for i in range(1, TURNS)]
        for thread in others:
            thread.start()
        # The first turn still holds every note it marked; the others finish all the same.
        finished = wait_for(lambda: set(range(1, TURNS)) <= done or bool(_lock_waits(pids)), timeout=60)
        waiting = _lock_waits(pids)
        assert finished and not waiting, f"turns queued on row locks: {waiting}"
        assert wait_for(lambda: set(range(1, TURNS)) <= done, timeout=60)
        assert 0 not in done
        assert {counts[i] for i in range(1, TURNS)} == {NOTES}
    finally:
        release.set()
        holder.join(timeout=120)
        for thread in locals().get("others", []):
            thread.join(timeout=120)
    assert counts[0] == NOTES
    # Last use stays honest: every recalled note was marked, by whichever turn held it.
    marks = list(OperatorMemory.objects.filter(operator=cast.owner).values_list("last_used_at", flat=True))
    assert len(marks) == NOTES and all(mark is not None and mark >= started for mark in marks)


def test_a_note_held_by_a_writer_does_not_hold_up_recall(cast, remember):
    """An edit of a note in progress (its row locked) does not delay a turn's recall either."""
    remember("lead with sev0")
    locked, release = threading.Event(), threading.Event()
    pids: list[int] = []
    recalled: list[Any] = []

    def writer() -> None:
        try:
            with transaction.atomic():
                list(OperatorMemory.objects.select_for_update().filter(operator=cast.owner))
                locked.set()
                release.wait(timeout=120)
        finally:
            connection.close()

    def turn() -> None:
        try:
            with transaction.atomic():
                pids.append(connection.connection.info.backend_pid)
                recalled.append(recall_for_prompt(scope_of(cast.owner, cast.acme)).recalled_count)
        except Exception as exc:
            recalled.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer), threading.Thread(target=turn)]
    threads[0].start()
    try:
        assert locked.wait(timeout=60)
        threads[1].start()
        assert wait_for(lambda: bool(recalled) or bool(_lock_waits(pids)), timeout=60)
        assert recalled == [1], f"recall waited on the writer's lock: {_lock_waits(pids)}"
    finally:
        release.set()
        for thread in threads:
            thread.join(timeout=120)
