"""Contract-suite harnesses for pi: session files written in the real v3 format, with and without RPC.

``pi``: a sessions directory only (no executable), so sending fails closed. ``pi-rpc``: the same, with
``pi_rpc_peer.py`` standing in for ``pi --mode rpc`` (no model). ``emit`` appends an assistant message to
the session file (the file grows while the provider follows it); ``received`` is what the RPC peer got.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from providers_app.contract import Operation, RuntimeRef, message_line
from providers_app.pi import PiProvider
from tess_site.scope import Scope

from .pi_writer import PiSessionWriter

RPC_PEER = Path(__file__).with_name("pi_rpc_peer.py")


class PiHarness:
    rpc = False
    started_status = "unknown"  # a session file says nothing about a live process
    starts_with_children = True  # the session_info entry naming it
    recognises_retries = True  # keys are matched to the entries their sends produced (providers_app/pi_keys.py)

    def __init__(self, directory: Path, name: str, **extra: Any) -> None:
        self.name = name
        self.directory = directory / "sessions"
        self.directory.mkdir()
        self.config: dict[str, Any] = {"kind": "pi", "sessions_dir": str(self.directory), "timeout": 10}
        if self.rpc:
            self.config["executable"] = [sys.executable, str(RPC_PEER)]
        self.config.update(extra)
        self.provider = PiProvider(name=name, config=self.config)
        self.writers: dict[str, PiSessionWriter] = {}

    @property
    def unsupported(self) -> frozenset[Operation]:
        absent = {Operation.TERMINATE, Operation.START}
        return frozenset(absent if self.rpc else absent | {Operation.SEND})

    def start(self, scope: Scope, title: str) -> RuntimeRef:
        writer = PiSessionWriter(self.directory)
        writer.name(title)
        self.writers[writer.id] = writer
        return next(s.ref for s in self.provider.list_sessions(scope) if s.ref.runtime_id == writer.id)

    def emit(self, ref: RuntimeRef, data: bytes) -> None:
        self.writers[ref.runtime_id].assistant(data.decode())

    @staticmethod
    def shown(data: bytes) -> str:
        """What the stream shows of one ``emit``: a message, ending its line."""
        return message_line(data.decode())

    def compact(self, ref: RuntimeRef, summary: str) -> None:
        """The runtime compacts its context: a ``compaction`` entry keeping everything from the latest one."""
        writer = self.writers[ref.runtime_id]
        assert writer.leaf is not None
        writer.compaction(summary, writer.leaf, tokens_before=4242)

    def rewrite(self, ref: RuntimeRef) -> None:
        """pi rewrites a whole session file when it migrates one on load (``SessionManager._rewriteFile``:
        every entry again through ``JSON.stringify``, so without the spaces this writer puts in): every byte
        offset after the first line moves."""
        path = self.writers[ref.runtime_id].path
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in lines))

    def received(self, ref: RuntimeRef) -> str:
        inbox = Path(str(self.writers[ref.runtime_id].path) + ".received")
        return inbox.read_text() if inbox.exists() else ""

    def close(self) -> None:
        self.provider.close()


class PiRpcHarness(PiHarness):
    rpc = True
