"""A client of ``pi --mode rpc``: JSON commands on stdin, responses and events on stdout.

As documented by pi-mono (``packages/coding-agent/docs/rpc.md`` of ``@mariozechner/pi-coding-agent``):
one JSON object per line in each direction, LF the only record separator (a trailing CR is stripped;
U+2028/U+2029 are not separators, so no generic line reader is used); a command may carry an ``id`` that
its ``{"type": "response", "command", "success", "error"?, "data"?}`` repeats; everything else on stdout
is an agent event. Commands used here: ``prompt`` (with ``streamingBehavior`` so a busy agent queues it),
``steer``, ``abort`` and ``get_state``. We write JSON with ASCII escapes only, so nothing we send can be
split anywhere but at our LF.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import logging
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .contract import ProviderError, ProviderUnavailable

logger = logging.getLogger(__name__)


class RpcProcess:
    """One ``pi --mode rpc --session <file>`` process and a reader thread that routes its responses."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None,
        env: dict[str, str],
        timeout: float,
        on_event: Callable[[dict[str, Any] | None], None] | None = None,
    ) -> None:
        # ``on_event`` is called on the reader thread with each agent event, then with None when stdout ends.
        self.timeout = timeout
        self._on_event = on_event
        self._ids = itertools.count(1)
        self._waiting: dict[str, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._ended = False  # stdout has ended: no response will come
        self.last_event_at: float | None = None
        self.last_used_at = time.monotonic()  # the last command Tess sent (or the start)
        try:
            # The argv is the instance's configuration, never a client's.
            self.process = subprocess.Popen(  # noqa: S603
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=cwd,
                env=env,
            )
        except OSError as exc:
            raise ProviderUnavailable("The pi executable could not be started.") from exc
        self._reader = threading.Thread(target=self._read, name="pi-rpc-reader", daemon=True)
        self._reader.start()

    def alive(self) -> bool:
        return self.process.poll() is None

    def idle_for(self, now: float) -> float:
        """Seconds since Tess last sent a command or pi last wrote an event."""
        return now - max(self.last_used_at, self.last_event_at or 0.0)

    def _read(self) -> None:
        stdout = self.process.stdout
        assert isinstance(stdout, io.BufferedReader)
        buffer = b""
        while True:
            block = stdout.read1(65536)
            if not block:
                break
            buffer += block
            while (end := buffer.find(b"\n")) >= 0:
                line, buffer = buffer[:end], buffer[end + 1 :]
                self._dispatch(line.removesuffix(b"\r"))
        with self._lock:  # the process is gone: wake every waiter, empty-handed, and refuse later ones
            self._ended = True
            for event, _ in self._waiting.values():
                event.set()
        if self._on_event is not None:
            self._on_event(None)

    def _dispatch(self, line: bytes) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            logger.warning("pi rpc: an unreadable line of %d bytes on stdout", len(line))
            return
        if not isinstance(record, dict):
            return
        if record.get("type") == "response" and isinstance(record.get("id"), str):
            with self._lock:
                waiter = self._waiting.get(record["id"])
            if waiter is not None:
                waiter[1].append(record)
                waiter[0].set()
            return
        self.last_event_at = time.monotonic()
        if self._on_event is not None:
            self._on_event(record)

    def request(self, command: dict[str, Any]) -> dict[str, Any]:
        """Send one command and wait for its response; ``ProviderUnavailable`` if none comes in time."""
        request_id = f"tess-{next(self._ids)}"
        self.last_used_at = time.monotonic()
        event, box = threading.Event(), list[dict[str, Any]]()
        with self._lock:
            if self._ended:  # pi has already gone: do not wait out the timeout for an answer
                raise ProviderUnavailable("The pi process is gone.")
            self._waiting[request_id] = (event, box)
        line = json.dumps({**command, "id": request_id}, ensure_ascii=True).encode() + b"\n"
        try:
            with self._write_lock:
                stdin = self.process.stdin
                assert stdin is not None
                stdin.write(line)
                stdin.flush()
            if not event.wait(self.timeout) or not box:
                raise ProviderUnavailable("pi exited or did not answer in time.")
            return box[0]
        except (BrokenPipeError, OSError) as exc:
            raise ProviderUnavailable("The pi process is gone.") from exc
        finally:
            with self._lock:
                self._waiting.pop(request_id, None)

    def command(self, command: dict[str, Any]) -> dict[str, Any]:
        """``request``, raising ``ProviderError`` when pi refuses (its text is logged, not passed on)."""
        response = self.request(command)
        if not response.get("success"):
            logger.warning("pi rpc: %s refused", command.get("type"))
            raise ProviderError(
                f"pi refused the {command.get('type')} command.", details={"command": str(command.get("type"))}
            )
        data = response.get("data")
        return data if isinstance(data, dict) else {}

    def close(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                self.process.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
