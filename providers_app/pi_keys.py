"""Idempotency keys of messages Tess sent to a pi session, matched to the entries the sends produced.

pi's RPC protocol knows no idempotency key, but every prompt it accepts becomes a ``message`` entry (role
``user``, the prompt's text) in the session file. So each send records its key, before sending, with the
file's size at that moment; the entry the send produced is the first user message with exactly that text
written after that offset and not claimed by another key. A retry with a recorded key whose entry is in the
file is ``replayed`` and sends nothing. A key whose entry is not (yet) in the file is sent again: the first
send may never have reached pi (a crash between recording and sending, a dead RPC process), and a prompt
pi has accepted but not yet written (a follow-up queued behind a running turn) is the one window in which
a retry can deliver twice.

The ledger lives in Tess's own directory (``VAR_DIR/pi-keys/<instance>/<session id>.json``), never in pi's
sessions directory; a lock file serialises the sends to one session across processes on this host.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings

from . import pi_files

KEEP_KEYS = 1000  # per session: older keys are forgotten first
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class KeyLedger:
    """The keys sent to one pi session. Use inside ``locked()``."""

    def __init__(self, instance: str, session_id: str) -> None:
        root = Path(settings.VAR_DIR) / "pi-keys" / _SAFE.sub("_", instance)
        self.path = root / f"{_SAFE.sub('_', session_id)}.json"
        self.keys: dict[str, dict[str, Any]] = {}

    @contextmanager
    def locked(self) -> Iterator[KeyLedger]:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self.keys = self._load()
                yield self
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def save(self) -> None:
        kept = dict(list(self.keys.items())[-KEEP_KEYS:])
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(kept))
        os.replace(temporary, self.path)

    def record(self, key: str, *, text: str, offset: int) -> None:
        self.keys.pop(key, None)  # re-inserted last: the newest are kept
        self.keys[key] = {"digest": _digest(text), "offset": offset, "entry_id": ""}
        self.save()

    def entry_of(self, key: str, session_file: Path) -> str:
        """The id of the entry the send of ``key`` produced, if it is in the file (remembered once found)."""
        sent = self.keys.get(key)
        if sent is None:
            return ""
        if sent.get("entry_id"):
            return str(sent["entry_id"])
        claimed = {str(other["entry_id"]) for other in self.keys.values() if other.get("entry_id")}
        found = _first_user_entry(session_file, int(sent.get("offset", 0)), str(sent.get("digest")), claimed)
        if found:
            sent["entry_id"] = found
            self.save()
        return found


def _first_user_entry(session_file: Path, offset: int, digest: str, claimed: set[str]) -> str:
    try:
        with open(session_file, "rb") as handle:
            for _start, _end, entry in pi_files.iter_lines(handle, offset):
                message = entry.get("message") if entry and entry.get("type") == "message" else None
                if not isinstance(message, dict) or message.get("role") != "user":
                    continue
                entry_id = str(entry.get("id", "")) if entry else ""
                if (
                    entry_id
                    and entry_id not in claimed
                    and _digest(pi_files._text_of(message.get("content"))) == digest
                ):
                    return entry_id
    except OSError:
        return ""
    return ""
