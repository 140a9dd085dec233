"""``/ws/me/``: what concerns one person across sessions (approvals awaiting them, their cards).

On every (re)connect: ``hello``, then a ``snapshot`` of what waits on the person (``approvals_app.waiting``),
then live events.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from tess_site.consumers import ScopedJsonConsumer

from .events import scope_user_group
from .waiting import waiting_on


class MeConsumer(ScopedJsonConsumer):
    async def on_connect(self) -> None:
        self.group = scope_user_group(self.tess_scope)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.send_event(
            "hello",
            {
                "username": self.tess_scope.actor_label,
                "tenant_slug": self.tess_scope.tenant.slug,
                "roles": sorted(r.value for r in self.tess_scope.roles),
                "channel": self.tess_scope.channel.value,
            },
        )
        # Joined first, then read: whatever changes meanwhile also arrives live, so nothing falls between.
        snapshot = await database_sync_to_async(waiting_on, thread_sensitive=False)(scope=self.tess_scope)
        await self.send_event("snapshot", snapshot)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def me_event(self, message: dict[str, Any]) -> None:
        # What reaches this socket is private (one-time approval links among it): the credential is checked
        # again first, so a token revoked or a browser logged out a moment ago gets nothing more.
        if await self.recheck():
            await self.send_event(message["kind"], message["body"])

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The per-user socket is one-way; clients talk through the REST API."""
