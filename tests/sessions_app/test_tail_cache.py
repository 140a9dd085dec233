"""The shared tail cache answers from memory only for what it knows; otherwise it asks the database."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from sessions_app import tail


@pytest.fixture
def database(monkeypatch):
    """The database as a list of seqs 1..N; records every read's cursor."""
    state = {"last": 0, "reads": []}

    async def read(session_id, after):
        state["reads"].append(after)
        top = min(state["last"], after + tail.BATCH)
        return [(seq, f"frame {seq}") for seq in range(after + 1, top + 1)]

    monkeypatch.setattr(tail, "_read", read)
    return state


def _run(coro):
    return asyncio.run(coro)


def test_a_fresh_full_batch_never_stands_in_for_the_end_of_the_stream(database):
    session_id = uuid.uuid4()
    database["last"] = 3 * tail.BATCH
    tail.subscribe(session_id)
    try:
        first = _run(tail.frames_after(session_id, 0, None))  # one consumer reads a full batch
        assert [seq for seq, _ in first] == list(range(1, tail.BATCH + 1))
        # Another consumer, just after, starts past what the cache holds: it must get its frames, not "nothing".
        past = _run(tail.frames_after(session_id, 2 * tail.BATCH, None))
        assert [seq for seq, _ in past] == list(range(2 * tail.BATCH + 1, 3 * tail.BATCH + 1))
    finally:
        tail.unsubscribe(session_id)


def test_a_fresh_read_that_reached_the_end_is_trusted_for_a_moment(database):
    session_id = uuid.uuid4()
    database["last"] = 10
    tail.subscribe(session_id)
    try:
        assert len(_run(tail.frames_after(session_id, 0, None))) == 10
        reads = len(database["reads"])
        assert _run(tail.frames_after(session_id, 10, None)) == []  # answered from the cache
        assert len(database["reads"]) == reads
        tail._tails[session_id].read_at = time.monotonic() - tail.FRESH_SECONDS - 1
        database["last"] = 12
        assert [seq for seq, _ in _run(tail.frames_after(session_id, 10, None))] == [11, 12]
    finally:
        tail.unsubscribe(session_id)


def test_a_consumer_the_cache_moved_past_while_it_waited_reads_its_own_batch(database):
    """Two consumers wait on the session's read lock: the first in line starts past the cache and replaces
    it with a window far ahead; the second, whose cursor the cache covered when it checked, is now behind
    that window and must read its own batch, not take "nothing" for the end of the stream and stall."""
    session_id = uuid.uuid4()
    database["last"] = 6 * tail.BATCH + 7
    tail.subscribe(session_id)

    async def scenario() -> tuple[list[int], list[int]]:
        await tail.frames_after(session_id, 0, None)  # the cache holds 1..BATCH
        lock = tail._tails[session_id].lock
        await lock.acquire()
        ahead = asyncio.create_task(tail.frames_after(session_id, 5 * tail.BATCH, None))
        behind = asyncio.create_task(tail.frames_after(session_id, 3, None))
        await asyncio.sleep(0.05)  # both are waiting on the lock, in that order
        lock.release()
        return [s for s, _ in await ahead], [s for s, _ in await behind]

    try:
        ahead, behind = _run(scenario())
        assert ahead == list(range(5 * tail.BATCH + 1, 6 * tail.BATCH + 1))
        assert behind == list(range(4, tail.BATCH + 4))
    finally:
        tail.unsubscribe(session_id)
