"""The Matrix harness of the contract suite: a bot account (the provider) and an agent account (the peer).

Both are fresh users on the session's Synapse (``synapse.py``), so no two harnesses share a room. The
provider starts rooms inviting the agent; the agent joins, writes output as ``m.text`` messages
(``emit``) and reads what the bot posted (``received``, each body followed by a line feed, as a terminal
would show a typed line).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import httpx

from providers_app.contract import Operation, RuntimeRef, message_line
from providers_app.matrix import MatrixProvider
from providers_app.matrix_client import segment
from tess_site.scope import Scope

from .synapse import MatrixUser, Synapse

CLIENT = "/_matrix/client/v3"


class MatrixPeer:
    """A plain Matrix user, outside the provider (to set the scene and look behind its back)."""

    def __init__(self, synapse: Synapse, user: MatrixUser) -> None:
        self.user_id = user.user_id
        self.http = httpx.Client(
            base_url=synapse.url, headers={"Authorization": f"Bearer {user.access_token}"}, timeout=30
        )

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, f"{CLIENT}{path}", **kwargs)
        response.raise_for_status()
        return response.json()

    def join(self, room: str) -> None:
        self.call("POST", f"/join/{segment(room)}", json={})

    def say(self, room: str, body: str, **content: Any) -> str:
        txn = secrets.token_hex(8)
        path = f"/rooms/{segment(room)}/send/m.room.message/{txn}"
        return str(self.call("PUT", path, json={"msgtype": "m.text", "body": body, **content})["event_id"])

    def messages(self, room: str) -> list[dict[str, Any]]:
        """Every message event of the room, oldest first (``/messages`` forwards from the beginning)."""
        events: list[dict[str, Any]] = []
        params: dict[str, Any] = {"dir": "f", "limit": 100, "filter": '{"types":["m.room.message"]}'}
        while True:
            page = self.call("GET", f"/rooms/{segment(room)}/messages", params=params)
            events.extend(page.get("chunk") or [])
            if not page.get("chunk") or not page.get("end"):
                return events
            params["from"] = page["end"]

    def membership(self, room: str, user_id: str) -> str:
        path = f"/rooms/{segment(room)}/state/m.room.member/{segment(user_id)}"
        return str(self.call("GET", path).get("membership", ""))


class MatrixHarness:
    """A named Matrix instance: a new bot account with its token in a file, and its agent peer."""

    needs = ("synapse",)  # fixtures make_runtime passes in
    unsupported: frozenset[Operation] = frozenset()

    def __init__(self, directory: Path, name: str, synapse: Synapse, **extra: Any) -> None:
        self.name = name
        self.synapse = synapse
        self.bot = synapse.register(f"bot-{name}")
        self.agent = MatrixPeer(synapse, synapse.register(f"agent-{name}"))
        self.token_file = directory / "matrix-token"
        self.token_file.write_text(self.bot.access_token + "\n")
        self.token_file.chmod(0o600)
        self.config: dict[str, Any] = {
            "kind": "matrix",
            "homeserver": synapse.url,
            "access_token_file": str(self.token_file),
            "invite": [self.agent.user_id],
            "stop_message": "Stopped by the operator.",
            "refresh_seconds": 0.1,
            "timeout": 30,
        }
        self.config.update(extra)
        self.provider = MatrixProvider(name=name, config=self.config)

    def start(self, scope: Scope, title: str) -> RuntimeRef:
        ref = self.provider.start_session(scope, title=title).ref
        self.agent.join(ref.runtime_id)
        return ref

    def emit(self, ref: RuntimeRef, data: bytes) -> None:
        self.agent.say(ref.runtime_id, data.decode())

    @staticmethod
    def shown(data: bytes) -> str:
        """What the stream shows of one ``emit``: a message, ending its line."""
        return message_line(data.decode())

    def received(self, ref: RuntimeRef) -> str:
        return "".join(
            f"{event['content'].get('body', '')}\n"
            for event in self.agent.messages(ref.runtime_id)
            if event.get("sender") == self.bot.user_id
        )

    def close(self) -> None:
        self.agent.http.close()
        self.provider.client.close()
