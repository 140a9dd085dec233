"""A reply reaching the session's stream while the model writes it: ephemeral ``turn.delta`` frames.

The model's pieces are gathered and handed on at most every ``INTERVAL_SECONDS`` (a token at a time would
cost one channel-layer message each), and whatever is left when the model finishes goes out before the
durable ``turn.out``. Nothing here is stored; a frame that is lost costs only the growing text, since
``turn.out`` carries the whole reply.
"""

from __future__ import annotations

import time
import uuid

from . import events, stream

INTERVAL_SECONDS = 0.05


class ReplyDeltas:
    """``on_delta`` for one turn's model call; ``flush()`` once the model has finished."""

    def __init__(self, *, session_id: uuid.UUID, turn_id: str) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        self.sent = 0  # characters handed on so far
        self.pending: list[str] = []
        self.last = 0.0

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
        events.send_reply_delta(self.session_id, dict(body))
        self.sent += len(text)
        self.last = time.monotonic()
