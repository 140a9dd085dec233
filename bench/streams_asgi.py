"""The ASGI app served by the stream benchmark: Tess itself, plus a bare Channels consumer as the baseline.

``/bench/raw/<group>/`` joins a group and forwards each raw ``group_send`` payload as it is: no
authentication, no database — what a stream costs with nothing but Channels.
"""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer
from channels.routing import URLRouter
from django.urls import path

from tess_site.asgi import application as tess_application


class RawConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.group = self.scope["url_route"]["kwargs"]["group"]
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def raw_event(self, message: dict[str, Any]) -> None:
        await self.send(text_data=message["text"])


raw_app = URLRouter([path("bench/raw/<str:group>/", RawConsumer.as_asgi())])


async def application(scope: dict[str, Any], receive: Any, send: Any) -> Any:
    if scope["type"] == "websocket" and scope["path"].startswith("/bench/raw/"):
        return await raw_app(scope, receive, send)
    return await tess_application(scope, receive, send)
