"""The newest events of each streamed session, shared by this process's stream consumers.

A wake-up reaches every subscriber of a session at once; without sharing, each would query the database
for the same rows and encode the same JSON. Here the first consumer to ask reads the rows once (under a
per-session lock), encodes each frame once, and the others take them from memory. The database stays the
truth: only rows read from it are cached, and a consumer that has fallen behind the cached window reads
the database directly.

Caching is sound because a session's events become visible strictly in seq order: ``events_append`` holds
the session row lock until its transaction commits, so event N+1 cannot commit before event N.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field

from channels.db import database_sync_to_async

from . import selectors
from .stream import EventKind, frame

BATCH = 500
KEEP = 2000  # frames kept per session
FRESH_SECONDS = 1.0  # a periodic check within this long of the last read takes the cache as it is


@dataclass
class _Tail:
    frames: list[tuple[int, str]] = field(default_factory=list)  # (seq, encoded frame), contiguous seqs
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
    read_at: float = 0.0  # monotonic time of the last database read
    at_end: bool = False  # that read came back short: the stream ended there when it was read

    def after(self, cursor: int, known: int | None) -> list[tuple[int, str]] | None:
        """Cached frames after ``cursor``, if the cache covers ``cursor + 1`` up to ``known``; else ``None``."""
        if not self.frames or known is None:
            return None
        first, last = self.frames[0][0], self.frames[-1][0]
        if not (first <= cursor + 1 and last >= known):
            return None
        start = cursor + 1 - first
        return self.frames[start : start + BATCH]


_tails: dict[uuid.UUID, _Tail] = {}


def subscribe(session_id: uuid.UUID) -> None:
    _tails.setdefault(session_id, _Tail()).users += 1


def unsubscribe(session_id: uuid.UUID) -> None:
    tail = _tails.get(session_id)
    if tail is not None:
        tail.users -= 1
        if tail.users <= 0:
            del _tails[session_id]


def _encode(session_id: uuid.UUID, after: int) -> list[tuple[int, str]]:
    return [
        (e.seq, json.dumps(frame(seq=e.seq, kind=e.kind, ts=e.ts.isoformat(), body=e.body)))
        for e in selectors.events_after(session_id=session_id, cursor=after, limit=BATCH)
    ]


_REDACTED_KIND = f'"kind": "{EventKind.REDACTED.value}"'


def _redact_cached(tail: _Tail, rows: list[tuple[int, str]]) -> None:
    """A ``redacted`` event among freshly read rows: the cached frames it names were read before their text
    was replaced, so they are re-encoded with the text they have now (the database's, as the event says)."""
    for _, text in rows:
        if _REDACTED_KIND not in text[:200]:
            continue
        body = json.loads(text).get("body") or {}
        seqs, replaced = set(body.get("seqs") or ()), body.get("text", "")
        for index, (seq, cached) in enumerate(tail.frames):
            if seq in seqs:
                old = json.loads(cached)
                old["body"] = {**(old.get("body") or {}), "text": replaced}
                tail.frames[index] = (seq, json.dumps(old))


# Not thread-sensitive: reads of different sessions (and the authorization checks) run in parallel.
_read = database_sync_to_async(_encode, thread_sensitive=False)


async def frames_after(
    session_id: uuid.UUID, cursor: int, known: int | None, *, read_on: bool = False
) -> list[tuple[int, str]]:
    """Up to ``BATCH`` encoded frames after ``cursor``. ``known``: a seq a wake-up said exists (or ``None``
    to look in the database whatever the cache holds).

    ``read_on``: the caller has just had a full batch, so more may follow: the cache answers only with a
    full batch, never because it was read a moment ago, and a shorter answer means the database held no
    more when it was read.
    """
    tail = _tails.get(session_id)
    if tail is None:
        return await _read(session_id, cursor)
    if read_on:
        known = max(known or 0, cursor + BATCH)
    elif known is None and tail.frames and tail.at_end and time.monotonic() - tail.read_at < FRESH_SECONDS:
        # Just read to the end by another consumer: no need to ask again so soon. A read that filled a whole
        # batch says nothing about where the stream ends, so it never stands in for the database.
        known = tail.frames[-1][0]
    cached = tail.after(cursor, known)
    if cached is not None:
        return cached
    if _behind(tail, cursor):
        return await _read(session_id, cursor)  # behind the window: read alone, leave the cache alone
    async with tail.lock:
        # Another consumer may have read while this one waited: its rows may serve, or may have moved the
        # window past this cursor (a read from far ahead replaces the cache; a long one trims it).
        cached = tail.after(cursor, known)
        if cached is not None:
            return cached
        if not _behind(tail, cursor):
            return await _read_into(tail, session_id, cursor)
    return await _read(session_id, cursor)


def _behind(tail: _Tail, cursor: int) -> bool:
    """The cache starts after ``cursor + 1``: the frames this consumer needs next are not in it."""
    return bool(tail.frames) and cursor + 1 < tail.frames[0][0]


async def _read_into(tail: _Tail, session_id: uuid.UUID, cursor: int) -> list[tuple[int, str]]:
    """Under the session's lock: read the next batch into the cache and answer from it."""
    # Read on from the end of the cache, or from the cursor when it is past that end (a batch read from
    # the cache's end would otherwise stop short of the cursor and look like the end of the stream).
    start = tail.frames[-1][0] if tail.frames and tail.frames[-1][0] >= cursor else cursor
    rows = await _read(session_id, start)
    _redact_cached(tail, rows)
    tail.read_at = time.monotonic()
    tail.at_end = len(rows) < BATCH
    if tail.frames and start == tail.frames[-1][0]:
        tail.frames.extend(rows)
    else:
        tail.frames = rows
    found = tail.after(cursor, cursor + 1 if tail.frames else None) or []  # before trimming drops cursor + 1
    del tail.frames[:-KEEP]
    return found
