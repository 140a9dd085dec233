"""A reply reaching the session's stream while the model writes it: ephemeral ``turn.delta`` frames.

The model's pieces are gathered and handed on at most every ``INTERVAL_SECONDS`` (a token at a time would
cost one channel-layer message each), and whatever is left when the model finishes goes out before the
durable ``turn.out``. Nothing here is stored in the database; a frame that is lost costs only the growing
text, since ``turn.out`` carries the whole reply. The text so far is also kept in the cache (Redis in
production, shared by every node) while the turn runs, so a client that connects mid-reply is sent it as
one piece from offset 0 (``replies_partial``) before the pieces that follow. A turn being answered announces
itself with an empty piece at offset 0 (``start``) as soon as it thinks, so clients know its ``turn_id``
(the thinking state, Stop) before the model's first word.
"""

from __future__ import annotations

import time
import uuid
from typing import Protocol

from django.conf import settings
from django.core.cache import cache

from . import events, selectors, stream

INTERVAL_SECONDS = 0.05


class ReplyProgress(Protocol):
    """A channel's own view of a reply being written (Discord edits its deferred reply): ``update`` gets the
    text so far at each flush and must not block; ``close`` comes once the model is done, before the turn is
    written, and may wait for what it has in flight."""

    def update(self, text: str) -> None: ...

    def close(self) -> None: ...


class ReplyDeltas:
    """``on_delta`` for one turn's model call; ``flush()`` once the model has finished."""

    def __init__(self, *, session_id: uuid.UUID, turn_id: str, progress: ReplyProgress | None = None) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        self.progress = progress
        self.sent = 0  # characters handed on so far
        self.text = ""
        self.pending: list[str] = []
        self.last = 0.0

    def start(self) -> None:
        """Say the turn is being answered: an empty piece at offset 0, before the model's first, so every client
        can show that Tess is thinking and offer Stop for this ``turn_id``."""
        cache.set(_partial_key(self.turn_id), "", timeout=_partial_seconds())
        events.send_reply_delta(self.session_id, dict(stream.turn_delta_body(turn_id=self.turn_id, offset=0, text="")))

    def __call__(self, piece: str) -> None:
        self.pending.append(piece)
        if time.monotonic() - self.last >= INTERVAL_SECONDS:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        text = "".join(self.pending)
        self.pending.clear()
        body = stream.turn_delta_body(turn_id=self.turn_id, offset=self.sent, text=text)
        self.text += text
        # Kept first, sent second: a client connecting in between gets this piece in the text so far.
        cache.set(_partial_key(self.turn_id), self.text, timeout=_partial_seconds())
        events.send_reply_delta(self.session_id, dict(body))
        if self.progress is not None:
            self.progress.update(self.text)
        self.sent += len(text)
        self.last = time.monotonic()


def _partial_key(turn_id: str) -> str:
    return f"tess:reply-so-far:{turn_id}"


def _partial_seconds() -> int:
    # Outlives any model call; the turn's own end makes it unreachable sooner (its TurnRun row goes).
    return int(settings.TESS_MODEL_TIMEOUT_SECONDS) + 60


def replies_partial(*, session_id: uuid.UUID) -> list[dict[str, object]]:
    """The ``turn.delta`` bodies that bring a client joining now up to date: for each turn of the session
    still being answered, its reply so far as one piece from offset 0."""
    running = selectors.turns_running(session_id=session_id)
    if not running:
        return []
    found = cache.get_many([_partial_key(turn_id) for turn_id in running])
    bodies: list[dict[str, object]] = []
    for turn_id in running:
        text = found.get(_partial_key(turn_id))
        if isinstance(text, str):  # empty: the turn is being answered, nothing written yet
            bodies.append(dict(stream.turn_delta_body(turn_id=turn_id, offset=0, text=text)))
    return bodies
