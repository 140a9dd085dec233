"""Writes pi session files in the real version 3 format, for tests (the peer behind the pi provider).

Follows pi-mono's ``packages/coding-agent/docs/session-format.md``: a ``session`` header line (version 3,
a UUID id, ISO timestamp, cwd), then entries with ``type``, an 8-hex-digit ``id``, ``parentId`` and
``timestamp``; a new entry's parent is the current leaf unless the writer branches from an earlier entry.
Each entry is appended as one LF-terminated line, so a reader following the file sees it grow.
"""

from __future__ import annotations

import json
import secrets
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


class PiSessionWriter:
    def __init__(self, directory: Path, *, cwd: str | None = None, session_id: str | None = None) -> None:
        """``cwd`` (default: ``directory``) must exist: pi refuses a session whose directory is gone."""
        self.id = session_id or str(uuid.uuid4())
        directory.mkdir(parents=True, exist_ok=True)
        cwd = cwd or str(directory.absolute())
        project = directory / ("--" + cwd.strip("/").replace("/", "-") + "--")
        project.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S-%f")[:-3] + "Z"
        self.path = project / f"{stamp}_{self.id}.jsonl"
        self.leaf: str | None = None
        self.ids: set[str] = set()
        self._line({"type": "session", "version": 3, "id": self.id, "timestamp": _now(), "cwd": cwd})

    def _line(self, record: dict[str, Any]) -> None:
        with self.path.open("ab") as handle:
            handle.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")

    def _new_id(self) -> str:
        while True:
            entry_id = secrets.token_hex(4)
            if entry_id not in self.ids:
                self.ids.add(entry_id)
                return entry_id

    def append(self, kind: str, *, parent: str | None = None, **fields: Any) -> str:
        """Append an entry under ``parent`` (default: the current leaf); it becomes the leaf."""
        entry_id = self._new_id()
        parent_id = parent if parent is not None else self.leaf
        self._line({"type": kind, "id": entry_id, "parentId": parent_id, "timestamp": _now(), **fields})
        self.leaf = entry_id
        return entry_id

    def user(self, text: str, **kw: Any) -> str:
        return self.append("message", message={"role": "user", "content": text, "timestamp": _now_ms()}, **kw)

    def assistant(self, text: str, *, model: str = "gpt-test", usage: dict[str, Any] | None = None, **kw: Any) -> str:
        """An assistant message; ``usage`` as pi-ai's ``Usage`` (default: 1 + 1 tokens that pi did not price)."""
        message = {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "(hidden)"}, {"type": "text", "text": text}],
            "api": "openai-responses",
            "provider": "openai",
            "model": model,
            "usage": usage
            or {
                "input": 1,
                "output": 1,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": 2,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
            },
            "stopReason": "stop",
            "timestamp": _now_ms(),
        }
        return self.append("message", message=message, **kw)

    def name(self, title: str) -> str:
        return self.append("session_info", name=title)

    def compaction(self, summary: str, first_kept: str, tokens_before: int = 50000) -> str:
        return self.append("compaction", summary=summary, firstKeptEntryId=first_kept, tokensBefore=tokens_before)

    def branch_summary(self, parent: str, from_id: str, summary: str) -> str:
        return self.append("branch_summary", parent=parent, fromId=from_id, summary=summary)

    def model_change(self) -> str:
        return self.append("model_change", provider="openai", modelId="gpt-test")

    def thinking(self, level: str = "high") -> str:
        return self.append("thinking_level_change", thinkingLevel=level)

    def label(self, target: str, label: str) -> str:
        return self.append("label", targetId=target, label=label)

    def custom(self) -> str:
        return self.append("custom", customType="test-extension", data={"count": 1})

    def custom_message(self, text: str, display: bool = True) -> str:
        return self.append("custom_message", customType="test-extension", content=text, display=display)

    def partial(self, text: str) -> None:
        """Half a line, as a writer caught mid-write leaves it (no LF yet)."""
        with self.path.open("ab") as handle:
            handle.write(text.encode())
