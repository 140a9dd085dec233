"""Consumer base: every websocket consumer has a Scope derived from its verified credential, and keeps it only
while that credential lives.

HTTP checks the credential on every request; a socket checks it once at connect. So every socket re-checks
every ``TESS_STREAM_RECHECK_SECONDS`` (with jitter), and a consumer re-checks before sending anything private:
a revoked token, a deactivated user, a browser that logged out or a membership removed closes the socket with
4401, and what would have been sent is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth import SESSION_KEY

from tess_site.accounts.scopes import scope_for_credential
from tess_site.accounts.selectors import live_credential
from tess_site.metrics import WEBSOCKET_CONNECTS, WEBSOCKET_DISCONNECTS, WEBSOCKET_OPEN
from tess_site.scope import Scope

CLOSE_CREDENTIAL_ENDED = 4401
CLOSE_NOT_MEMBER = 4403


class ScopedJsonConsumer(AsyncJsonWebsocketConsumer):
    """Accepts only callers whose credential makes them a member of a tenant; sets ``self.tess_scope``."""

    tess_scope: Scope
    _metrics_label: str | None = None  # the consumer label while this socket counts as open

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            # Closing before accept refuses the handshake (HTTP 403), as for any missing or bad credential.
            await self.close()
            return
        scope = await database_sync_to_async(self._derive_scope)()
        if scope is None:
            # A close code reaches the client only after the handshake: accept, then close with 4403 so a
            # signed-in caller learns its credential is valid but grants no tenant (retrying will not help).
            await self.accept()
            await self.close(code=CLOSE_NOT_MEMBER)
            return
        self.tess_scope = scope
        await self.accept()
        self._count_open()
        await self.on_connect()
        if not self._closing:
            self._ticker = asyncio.create_task(self._tick())

    _closing = False
    _ticker: asyncio.Task[None] | None = None

    async def close(self, code: int | bool | None = None, reason: str | None = None) -> None:
        self._closing = True
        await super().close(code=code, reason=reason)

    def _count_open(self) -> None:
        self._metrics_label = type(self).__name__
        WEBSOCKET_CONNECTS.labels(consumer=self._metrics_label).inc()
        WEBSOCKET_OPEN.labels(consumer=self._metrics_label).inc()

    async def dispatch(self, message: dict[str, Any]) -> None:
        """A handler that fails ends this socket (the server closes it, and no disconnect message follows):
        it no longer counts as open. A client that leaves while ``on_connect`` still sends is one such end."""
        try:
            await super().dispatch(message)
        except Exception:
            await self._ended()
            raise

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        await self._ended()
        await super().websocket_disconnect(message)

    async def _ended(self) -> None:
        """Stop the re-check ticker and count the socket closed, once, however it ended."""
        ticker, self._ticker = self._ticker, None
        if ticker is not None and ticker is not asyncio.current_task():
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ticker
        label = self._metrics_label
        if label is not None:
            self._metrics_label = None
            WEBSOCKET_DISCONNECTS.labels(consumer=label).inc()
            WEBSOCKET_OPEN.labels(consumer=label).dec()

    def _derive_scope(self) -> Scope | None:
        session = self.scope.get("session")
        scope = scope_for_credential(
            user=self.scope["user"],
            auth=self.scope.get("tess_auth"),
            session=session,
            correlation_id=self.scope["correlation_id"],
        )
        if session is not None and scope is not None and session.modified:
            session.save()
        return scope

    async def on_connect(self) -> None:
        """Subclasses subscribe and send their first frames here."""

    async def on_tick(self) -> None:
        """Subclasses' periodic work, after each successful re-check (catch-up, heartbeats)."""

    def still_allowed(self, scope: Scope) -> int | None:
        """Subclasses: with the credential still live (``scope`` is fresh), may this socket go on? ``None`` if so,
        otherwise the close code. Called in a worker thread: database reads are fine."""
        return None

    async def recheck(self) -> bool:
        """True while the credential lives and ``still_allowed``; otherwise the socket is closed."""
        code = await database_sync_to_async(self._still_allowed, thread_sensitive=False)()
        if code is None:
            return True
        await self.close(code=code)
        return False

    def tick_seconds(self) -> float:
        return float(settings.TESS_STREAM_RECHECK_SECONDS)

    async def _tick(self) -> None:
        every = self.tick_seconds()
        # Sockets opened together would otherwise all re-check in the same instant.
        await asyncio.sleep(random.uniform(0, every))  # noqa: S311 (jitter, not security)
        while True:
            await asyncio.sleep(every)
            if not await self.recheck():
                return
            await self.on_tick()

    def _still_allowed(self) -> int | None:
        scope = self._live_scope()
        if scope is None:
            return CLOSE_CREDENTIAL_ENDED
        return self.still_allowed(scope)

    def _live_scope(self) -> Scope | None:
        """The socket's Scope derived afresh, or ``None`` once its credential no longer holds for its tenant."""
        actor = self.tess_scope.actor
        token = self.scope.get("tess_auth")  # the PersonalToken of a token connection, absent for a browser
        if actor is None:
            return None
        live = live_credential(user_id=actor.pk, token_id=token.pk if token is not None else None)
        if live is None:
            return None
        user, auth = live
        session = self.scope.get("session")
        if auth is None and (session is None or not _session_still_logged_in(session, user.pk)):
            return None
        scope = scope_for_credential(
            user=user, auth=auth, session=None if auth else session, correlation_id=self.tess_scope.correlation_id
        )
        if scope is None or scope.tenant.pk != self.tess_scope.tenant.pk:
            return None
        return scope

    async def send_event(self, kind: str, body: dict[str, Any], seq: int | None = None) -> None:
        await self.send_json({"seq": seq, "kind": kind, "body": body})


def _session_still_logged_in(session: Any, user_id: int) -> bool:
    """The browser session still exists in the store and still names this user (logout deletes it)."""
    key = session.session_key
    if not key:
        return False
    fresh = session.__class__(session_key=key)
    return bool(fresh.exists(key)) and str(fresh.get(SESSION_KEY)) == str(user_id)
