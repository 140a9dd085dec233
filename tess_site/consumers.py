"""Consumer base: every websocket consumer has a Scope derived from its verified credential."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from tess_site.accounts.scopes import scope_for_credential
from tess_site.metrics import WEBSOCKET_CONNECTS, WEBSOCKET_DISCONNECTS, WEBSOCKET_OPEN
from tess_site.scope import Scope

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

    def _count_open(self) -> None:
        self._metrics_label = type(self).__name__
        WEBSOCKET_CONNECTS.labels(consumer=self._metrics_label).inc()
        WEBSOCKET_OPEN.labels(consumer=self._metrics_label).inc()

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        label = self._metrics_label
        if label is not None:
            self._metrics_label = None
            WEBSOCKET_DISCONNECTS.labels(consumer=label).inc()
            WEBSOCKET_OPEN.labels(consumer=label).dec()
        await super().websocket_disconnect(message)

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

    async def send_event(self, kind: str, body: dict[str, Any], seq: int | None = None) -> None:
        await self.send_json({"seq": seq, "kind": kind, "body": body})
