"""Contract-suite harness for Hermes: the provider against the HTTP stand-in on a real local port.

``emit`` stores an assistant message in the session, as a finished run does; ``received`` is every run
input the server got for the session, one per line. The key reaches the provider through a file, as a
``*_FILE`` secret does in production.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from providers_app.contract import Operation, RuntimeRef, message_line
from providers_app.hermes import HermesProvider
from tess_site.scope import Scope

from .hermes_standin import HermesStandIn


class HermesHarness:
    started_status = "running"
    starts_with_children = False  # a new session has no child sessions
    recognises_retries = True  # Idempotency-Key
    unsupported: frozenset[Operation] = frozenset()

    def __init__(self, directory: Path, name: str, **features: Any) -> None:
        self.name = name
        self.token = "hk_" + secrets.token_urlsafe(24)
        self.standin = HermesStandIn(self.token, **features)
        self.key_file = directory / "hermes.key"
        self.key_file.write_text(self.token + "\n")
        self.config: dict[str, Any] = {
            "kind": "hermes",
            "base_url": self.standin.base_url,
            "api_key_file": str(self.key_file),
            "timeout": 10,
            "capabilities_seconds": 0,
        }
        self.provider = HermesProvider(name=name, config=self.config)

    def start(self, scope: Scope, title: str) -> RuntimeRef:
        return self.provider.start_session(scope, title=title).ref

    def emit(self, ref: RuntimeRef, data: bytes) -> None:
        self.standin.add_message(ref.runtime_id, "assistant", data.decode())

    @staticmethod
    def shown(data: bytes) -> str:
        """What the stream shows of one ``emit``: a message, ending its line."""
        return message_line(data.decode())

    def received(self, ref: RuntimeRef) -> str:
        return "".join(line + "\n" for line in self.standin.received.get(ref.runtime_id, []))

    def close(self) -> None:
        self.provider.close()
        self.standin.close()
