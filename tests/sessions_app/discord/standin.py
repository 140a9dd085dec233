"""A local stand-in of the Discord API routes Tess calls, served over real HTTP in a thread.

Routes: ``PATCH /webhooks/{app}/{token}/messages/@original`` (interaction follow-up), ``POST
/channels/{id}/messages`` and ``POST /users/@me/channels`` (bot; needs ``Authorization: Bot …``).
Every request is recorded as ``(method, path, json body, authorization)``, and when it came (``times``,
``time.monotonic()``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class DiscordStandIn:
    base: str = ""
    calls: list[tuple[str, str, Any, str]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    def paths(self, method: str) -> list[str]:
        return [path for m, path, _, _ in self.calls if m == method]


@contextmanager
def running_discord_standin() -> Iterator[DiscordStandIn]:
    standin = DiscordStandIn()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
            auth = self.headers.get("Authorization") or ""
            standin.times.append(time.monotonic())
            standin.calls.append((self.command, self.path, body, auth))
            if self.path.startswith(("/channels/", "/users/")) and not auth.startswith("Bot "):
                self._reply(401, {"message": "401: Unauthorized"})
            elif self.path == "/users/@me/channels":
                self._reply(200, {"id": f"dm-{body['recipient_id']}", "type": 1})
            elif (self.command == "PATCH" and self.path.startswith("/webhooks/")) or self.path.startswith("/channels/"):
                self._reply(200, {"id": "m1", "content": body.get("content")})
            else:
                self._reply(404, {"message": "404: Not Found"})

        do_PATCH = do_POST = _handle

        def _reply(self, status: int, data: Any) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    standin.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield standin
    finally:
        server.shutdown()
        server.server_close()
