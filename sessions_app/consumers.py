"""``/ws/sessions/{id}/stream/?cursor=N``: every event after N from the database, then live ones.

A wake-up only says "events up to seq S exist"; the consumer reads them from the database after the last
seq it sent, so a missed or duplicated wake-up changes nothing. Access is checked on connect and again on
every re-check tick (``TESS_STREAM_RECHECK_SECONDS``) and on a revocation message, so logout, deactivation
or a revoked grant close the socket within seconds.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from tess_site.consumers import CLOSE_CREDENTIAL_ENDED, ScopedJsonConsumer
from tess_site.errors import NotFound
from tess_site.metrics import observe_stream_lag
from tess_site.scope import Scope

from . import board, events, selectors, tail
from .bindings import binding_moved, binding_renew, client_bind, client_binding_on, client_ref
from .replies import replies_partial
from .stream import BINDING_MOVED, TURN_DELTA, frame

logger = logging.getLogger(__name__)

CLOSE_BAD_REQUEST = 4400
CLOSE_NOT_FOUND = 4404
__all__ = ["CLOSE_BAD_REQUEST", "CLOSE_CREDENTIAL_ENDED", "CLOSE_NOT_FOUND", "SessionStreamConsumer"]


class SessionStreamConsumer(ScopedJsonConsumer):
    session_id: uuid.UUID | None = None
    last_sent = 0
    group = ""
    live = False  # past the first catch-up: what is sent now was produced while the socket was open
    # The drawer's or CLI profile's binding this socket renews and follows (``bindings.py``).
    binding_id: int | None = None
    binding_group = ""
    moved_to = ""  # the session a ``binding.moved`` frame already pointed at
    _renewed_at = 0.0

    async def on_connect(self) -> None:
        events.remember_serving_loop()
        raw_id = self.scope["url_route"]["kwargs"]["session_id"]
        cursor = _cursor(self.scope.get("query_string", b""))
        if cursor is None:
            await self.close(code=CLOSE_BAD_REQUEST)
            return
        if not await database_sync_to_async(self._can_read)(raw_id):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.session_id = uuid.UUID(raw_id)
        self.last_sent = cursor
        self.group = events.session_group(self.session_id)
        # Join first, then catch up: a wake-up arriving meanwhile only causes one more (empty) read.
        await self.channel_layer.group_add(self.group, self.channel_name)
        self._lock = asyncio.Lock()
        tail.subscribe(self.session_id)
        await self._catch_up()
        self.live = True
        # A reply being written now: its text so far, then (already queued to this socket) the pieces after it.
        for body in await database_sync_to_async(replies_partial, thread_sensitive=False)(session_id=self.session_id):
            await self.send_json(frame(seq=None, kind=TURN_DELTA, ts=timezone.now().isoformat(), body=body))
        # Bound once live, so binding never delays the first events.
        await self._bind()
        await self._follow_binding()  # a cutover moved this client on before it reconnected here

    def _can_read(self, raw_id: str) -> bool:
        return selectors.can_read_session(scope=self.tess_scope, session_id=raw_id)

    async def _bind(self) -> None:
        token = self.scope.get("tess_auth")
        browser = self.scope.get("session")
        ref = client_ref(
            scope=self.tess_scope,
            token_id=token.pk if token is not None else None,
            session_key=browser.session_key if browser is not None and token is None else None,
        )
        if ref is None or self.session_id is None:
            return
        # The drawer's socket is the browser session using a session; a CLI profile's commands bind it (POST
        # .../bind/) and its sockets only follow that binding, so a profile watching many sessions moves nothing.
        bind = client_bind if token is None else client_binding_on
        try:
            bound = await database_sync_to_async(bind, thread_sensitive=False)(
                scope=self.tess_scope, session_id=self.session_id, ref=ref
            )
        except NotFound:
            return  # access ended since connecting: the next re-check closes the socket (4404)
        except DatabaseError:
            # Following a cutover is a convenience of this socket: the stream goes on without it.
            logger.warning("session %s: the socket's client binding could not be made", self.session_id, exc_info=True)
            return
        if bound is None:
            return
        self.binding_id, self.binding_group = bound.binding_id, events.binding_group(bound.binding_id)
        self._renewed_at = time.monotonic()
        await self.channel_layer.group_add(self.binding_group, self.channel_name)

    async def _follow_binding(self) -> None:
        """Send ``binding.moved`` once per move of this socket's binding to a session its viewer may read."""
        if self.binding_id is None:
            return
        body = await database_sync_to_async(self._moved_body, thread_sensitive=False)()
        if body is None:
            self.moved_to = ""
            if time.monotonic() - self._renewed_at > settings.TESS_CLIENT_BINDING_SECONDS / 4:
                self._renewed_at = time.monotonic()
                await database_sync_to_async(binding_renew, thread_sensitive=False)(
                    binding_id=self.binding_id, session_id=self.session_id
                )
            return
        if body["to"] == self.moved_to:
            return
        self.moved_to = body["to"]
        await self.send_json(frame(seq=None, kind=BINDING_MOVED, ts=timezone.now().isoformat(), body=body))

    def _moved_body(self) -> dict[str, Any] | None:
        assert self.binding_id is not None and self.session_id is not None
        body = binding_moved(binding_id=self.binding_id, session_id=self.session_id)
        if body is None or not selectors.can_read_session(scope=self.tess_scope, session_id=body["to"]):
            return None
        return body

    async def disconnect(self, code: int) -> None:
        if self.binding_group:
            await self.channel_layer.group_discard(self.binding_group, self.channel_name)
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        if self.session_id is not None and getattr(self, "_lock", None) is not None:
            tail.unsubscribe(self.session_id)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The stream is one-way; clients talk through the REST API."""

    # --- channel layer messages (see events.py) ---

    async def stream_wake(self, message: dict[str, Any]) -> None:
        seq = int(message.get("seq", 0))
        if seq > self.last_sent:
            await self._catch_up(known=seq)

    async def stream_recheck(self, message: dict[str, Any]) -> None:
        await self.recheck()

    async def stream_moved(self, message: dict[str, Any]) -> None:
        """A cutover or rollback moved a binding this socket is bound through: where to is read afresh."""
        if await self.recheck():
            await self._follow_binding()

    async def stream_delta(self, message: dict[str, Any]) -> None:
        """A piece of a reply being written: sent as it comes, never stored (``stream.TURN_DELTA``)."""
        body = message.get("body")
        if self.live and isinstance(body, dict):
            await self.send_json(frame(seq=None, kind=TURN_DELTA, ts=timezone.now().isoformat(), body=body))

    # --- reading and sending ---

    async def _catch_up(self, known: int | None = None) -> None:
        """Send every event after the last one sent. ``known``: the seq a wake-up announced."""
        assert self.session_id is not None
        async with self._lock:
            read_on = False
            while True:
                frames = await tail.frames_after(self.session_id, self.last_sent, known, read_on=read_on)
                for seq, text in frames:
                    await self.send(text_data=text)
                    self.last_sent = seq
                    if self.live:
                        _observe_lag(text)
                if len(frames) < tail.BATCH and (known is None or self.last_sent >= known):
                    return
                if not frames:
                    return
                # A full batch: more may follow, however recently the cache was read. Without this a long
                # backlog would stop at the first batch and trickle out one batch per re-check tick.
                read_on = len(frames) == tail.BATCH

    _since_heartbeat = 0.0

    def tick_seconds(self) -> float:
        return float(min(settings.TESS_STREAM_RECHECK_SECONDS, settings.TESS_STREAM_HEARTBEAT_SECONDS))

    async def on_tick(self) -> None:
        await self._catch_up()  # also the safety net for any wake-up that never came
        await self._follow_binding()  # and for a lost ``stream.moved``; renews the binding while in use
        self._since_heartbeat += self.tick_seconds()
        if self._since_heartbeat >= settings.TESS_STREAM_HEARTBEAT_SECONDS:
            self._since_heartbeat = 0.0
            await self.send_json(
                frame(seq=None, kind="heartbeat", ts=timezone.now().isoformat(), body={"last_seq": self.last_sent})
            )

    def still_allowed(self, scope: Scope) -> int | None:
        """The fresh scope may still read the session (a revoked grant closes with 4404)."""
        if not selectors.can_read_session(scope=scope, session_id=self.session_id):
            return CLOSE_NOT_FOUND
        return None


# The ts of an encoded frame ({"seq", "kind", "ts", "body"} in that order, see stream.frame): found in the
# first characters instead of decoding a body that may be large.
_FRAME_TS = re.compile(r'"ts": ?"([^"]+)"')


def _observe_lag(text: str) -> None:
    match = _FRAME_TS.search(text, 0, 200)
    if match is None:
        return
    try:
        observe_stream_lag(datetime.fromisoformat(match.group(1)))
    except ValueError:
        return


def _cursor(query_string: bytes) -> int | None:
    values = parse_qs(query_string.decode("latin-1")).get("cursor", ["0"])
    try:
        cursor = int(values[-1])
    except ValueError:
        return None
    return cursor if cursor >= 0 else None


class BoardConsumer(ScopedJsonConsumer):
    """``/ws/board/``: a ``row`` frame whenever a session the viewer may see changes state (or starts or ends).

    A change message carries only the session's id; the row is read through the viewer's own rule
    (``board.board_row_of``), after the credential is re-checked, so a session the viewer may not see never
    reaches this socket, and a logged-out browser gets nothing more.
    """

    group = ""

    async def on_connect(self) -> None:
        events.remember_serving_loop()
        self.group = events.board_group(self.tess_scope.tenant.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.send_event("hello", {})

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The board socket is one-way; the page filters and pages over HTTP."""

    async def board_changed(self, message: dict[str, Any]) -> None:
        if not await self.recheck():
            return
        row = await database_sync_to_async(self._row, thread_sensitive=False)(str(message.get("session_id", "")))
        if row is not None:
            await self.send_event("row", row)

    def _row(self, session_id: str) -> dict[str, Any] | None:
        try:
            pk = uuid.UUID(session_id)
        except ValueError:
            return None
        return board.board_row_of(scope=self.tess_scope, session_id=pk)
