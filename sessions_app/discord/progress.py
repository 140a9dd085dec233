"""A deferred ``/tess ask`` whose reply grows in Discord: the interaction's deferred message ("Tess is
thinking…") is edited with the reply so far at most every ``TESS_DISCORD_EDIT_SECONDS``, while the model
writes it.

The edits run in a thread of their own, so the model's stream never waits on Discord; the latest text
replaces any not yet sent (an edit shows the whole text so far, so a skipped one loses nothing). The
thread is stopped, and its edit in flight finished, before the turn is written: the whole reply, queued in
the outbox with the turn, is then the last edit of the message, so a late partial edit never overwrites it.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings

from .models import DiscordInteraction
from .sender import DiscordUnavailable, followup

logger = logging.getLogger(__name__)

GROWING_MARK = " …"  # after the text so far: the reply is still being written


class FollowupProgress:
    """``gateway.ReplyProgress`` for one deferred interaction."""

    def __init__(self, interaction: DiscordInteraction, *, interval: float | None = None) -> None:
        self.interaction = interaction
        self.interval = float(settings.TESS_DISCORD_EDIT_SECONDS if interval is None else interval)
        self.edits = 0
        self._latest = ""
        self._sent = ""
        self._closed = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="discord-reply-edits", daemon=True)
        self._thread.start()

    def update(self, text: str) -> None:
        with self._changed:
            self._latest = text
            self._changed.notify()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    def _run(self) -> None:
        last = 0.0
        while True:
            with self._changed:
                while not self._closed and self._latest == self._sent:
                    self._changed.wait()
                # At most one edit per interval; the text may grow meanwhile, and the newest is sent.
                until = last + self.interval
                while not self._closed and time.monotonic() < until:
                    self._changed.wait(until - time.monotonic())
                if self._closed:
                    return
                text = self._latest
            try:
                followup(self.interaction, text.rstrip() + GROWING_MARK)
                self.edits += 1
            except DiscordUnavailable as exc:
                logger.info("interaction %s: the growing reply was not edited (%s)", self.interaction.pk, exc)
            self._sent = text
            last = time.monotonic()
