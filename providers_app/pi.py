"""The pi runtime provider: pi coding-agent session files as replay sources, and ``pi --mode rpc`` to talk.

Session files are replay sources, never truth about other agents; without an executable, sending fails
closed. Options, the RPC processes' lifetime and what is not offered: README, "Runtime providers".
"""

from __future__ import annotations

import logging
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from tess_site.scope import Scope

from . import pi_files, pi_keys
from .contract import (
    AgentObservation,
    AgentRuntimeProvider,
    AgentState,
    Attachment,
    AttachMode,
    Capabilities,
    Operation,
    ProviderError,
    ProviderHealth,
    RuntimeNode,
    RuntimeNotFound,
    RuntimeRef,
    RuntimeSession,
    SendResult,
    StreamPage,
)
from .pi_rpc import RpcProcess

logger = logging.getLogger(__name__)

# What an RPC process inherits from Tess's environment: enough to run, never Tess's own secrets.
BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
READ_OPERATIONS = frozenset({Operation.LIST, Operation.TREE, Operation.STREAM, Operation.ATTACH, Operation.DETACH})


def _argv(value: Any, instance: str) -> list[str]:
    if value in (None, "", []):
        return []
    parts = [value] if isinstance(value, str) else value
    if not isinstance(parts, list) or not all(isinstance(part, str) and part for part in parts):
        raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{instance!r}]['executable'] must be a string or a list.")
    return list(parts)


class PiProvider(AgentRuntimeProvider):
    """A named pi instance: one sessions directory, optionally a pi executable. Thread-safe."""

    kind = "pi"
    reports_usage = True  # each assistant message's usage, from the session file

    def __init__(self, *, name: str, config: dict[str, Any]) -> None:
        super().__init__(name=name, config=config)
        directory = config.get("sessions_dir")
        if not directory or not isinstance(directory, str):
            raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{name!r}] needs a 'sessions_dir'.")
        self.root = (Path(settings.VAR_DIR) / "pi" / Path(directory).expanduser()).absolute()
        self.executable = _argv(config.get("executable"), name)
        self.timeout = float(config.get("timeout", 10.0))
        try:
            self.idle_seconds = float(config.get("idle_seconds", 600))
        except (TypeError, ValueError):
            self.idle_seconds = -1.0
        if self.idle_seconds < 0:
            raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{name!r}]['idle_seconds'] must be 0 or more seconds.")
        try:
            self.active_seconds = float(config.get("active_seconds", 120))
        except (TypeError, ValueError):
            raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{name!r}]['active_seconds'] must be seconds.") from None
        self.cwd = str(config["cwd"]) if config.get("cwd") else None
        extra_env = config.get("env") or {}
        if not isinstance(extra_env, dict):
            raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{name!r}]['env'] must be a mapping.")
        self.env = {str(key): str(value) for key, value in extra_env.items()}
        passthrough = config.get("env_passthrough") or []
        if not isinstance(passthrough, list) or not all(isinstance(item, str) for item in passthrough):
            raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{name!r}]['env_passthrough'] must be a list of names.")
        self.passthrough = tuple(BASE_ENV) + tuple(passthrough)
        self._summaries: dict[Path, pi_files.Summary] = {}
        self._processes: dict[str, RpcProcess] = {}
        self._lock = threading.Lock()

    # --- what it offers ------------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        operations = READ_OPERATIONS | ({Operation.SEND} if self.executable else set())
        modes = {AttachMode.READ_ONLY} | ({AttachMode.INTERACTIVE} if self.executable else set())
        return Capabilities(
            kind=self.kind,
            instance=self.name,
            operations=frozenset(operations),
            attach_modes=frozenset(modes),
            cursor="'<byte offset of an entry's line>.<bytes of its text returned>.<id of the line before>' in the "
            "session file",
            checkpoints=True,  # compaction entries
        )

    def health(self) -> ProviderHealth:
        """Heartbeat: the sessions directory is readable, how many sessions, the latest write; RPC processes."""
        detail: dict[str, Any] = {"sessions_dir": str(self.root), "rpc": bool(self.executable)}
        if not self.root.is_dir() or not os.access(self.root, os.R_OK | os.X_OK):
            return ProviderHealth(
                ok=False, kind=self.kind, instance=self.name, detail={**detail, "error": "sessions_dir_unreadable"}
            )
        files = self._session_files()
        latest = max((summary.mtime for _, summary in files), default=None)
        with self._lock:
            self._reap_idle()
            live = sum(process.alive() for process in self._processes.values())
        detail |= {
            "sessions": len(files),
            "rpc_processes": live,
            "last_activity_at": datetime.fromtimestamp(latest, tz=UTC).isoformat() if latest else None,
        }
        return ProviderHealth(
            ok=True, kind=self.kind, instance=self.name, detail=detail, heartbeat_at=datetime.now(UTC)
        )

    # --- reads ---------------------------------------------------------------------------------------

    def list_sessions(self, scope: Scope) -> list[RuntimeSession]:
        return [self._session(path, summary) for path, summary in self._session_files()]

    def get_session_tree(self, scope: Scope, ref: RuntimeRef | None = None) -> list[RuntimeNode]:
        """Per session: its entries by ``parentId``, branches side by side, the path to the leaf active."""
        if ref is not None:
            path = self._path_of(ref)
            summary = self._summary(path)
            files = [(path, summary)] if summary is not None else []
        else:
            files = self._session_files()
        return [
            pi_files.build_tree(summary.header.id, self._title(summary), pi_files.read_entries(path))
            for path, summary in files
        ]

    def stream_session(self, ref: RuntimeRef, cursor: str | None, scope: Scope, *, limit: int = 65536) -> StreamPage:
        """Entries after ``cursor``, one chunk per entry with text (``source`` = entry id). Never ``ended``:
        a session file may always grow again."""
        path = self._path_of(ref)
        chunks, next_cursor = pi_files.read_page(path, cursor, limit)
        return StreamPage(chunks=tuple(chunks), next_cursor=next_cursor, ended=False)

    def resume_cursor(self, ref: RuntimeRef, cursor: str, checkpoint: dict[str, Any], scope: Scope) -> str:
        """Where ``cursor`` points in the file pi rewrote, found from the checkpoint by entry ids
        (``pi_files.resume_cursor``)."""
        return pi_files.resume_cursor(self._path_of(ref), cursor, checkpoint)

    def agent_state(self, ref: RuntimeRef, scope: Scope) -> AgentObservation:
        """RPC ``get_state`` when this instance runs pi for the session (``isStreaming``: working), and the
        session file's latest message: a finished assistant turn is idle, one that stopped on an error is
        an error. Without an RPC process, an unfinished turn is working while the file was written in the
        last ``active_seconds``, and unknown after that (pi may have been stopped mid-turn)."""
        path = self._path_of(ref)
        summary = self._summary(path)
        if summary is None:
            raise RuntimeNotFound(details={"provider": self.name})
        with self._lock:
            process = self._processes.get(ref.runtime_id)
        finished = summary.last_role == "assistant" and summary.last_stop in ("stop", "length", "aborted")
        failed = summary.last_role == "assistant" and summary.last_stop == "error"
        if process is not None and process.alive():
            if process.command({"type": "get_state"}).get("isStreaming"):
                return AgentObservation(AgentState.WORKING, "get_state: streaming")
            if failed:
                return AgentObservation(AgentState.ERROR, "the last turn stopped on an error")
            return AgentObservation(AgentState.IDLE, "get_state: not streaming")
        if failed:
            return AgentObservation(AgentState.ERROR, "the last turn stopped on an error")
        if finished or not summary.last_role:
            return AgentObservation(AgentState.IDLE, "the last turn is finished")
        if time.time() - summary.mtime < self.active_seconds:
            return AgentObservation(AgentState.WORKING, "a turn is under way in the session file")
        return AgentObservation(AgentState.UNKNOWN, "an unfinished turn and no recent writes")

    # --- actions -------------------------------------------------------------------------------------

    def send_message(self, ref: RuntimeRef, message: str, idempotency_key: str, scope: Scope) -> SendResult:
        """``prompt`` over RPC; a busy agent queues it as a follow-up.

        pi knows no idempotency keys, so Tess records each key with the send and matches it to the user
        message entry the send produced in the session file (``pi_keys``): a retry whose entry is already
        there is ``replayed`` and sends nothing; the message id is that entry's id once it is written.
        """
        self.require(Operation.SEND)
        path = self._path_of(ref)
        with pi_keys.KeyLedger(self.name, ref.runtime_id).locked() as ledger:
            if idempotency_key:
                entry_id = ledger.entry_of(idempotency_key, path)
                if entry_id:
                    logger.info("pi %s: key already sent to %s as %s", self.name, ref.runtime_id, entry_id)
                    return SendResult(delivered=True, provider_message_id=entry_id, replayed=True)
                ledger.record(idempotency_key, text=message, offset=path.stat().st_size)
            self._process_for(ref).command({"type": "prompt", "message": message, "streamingBehavior": "followUp"})
            entry_id = ledger.entry_of(idempotency_key, path) if idempotency_key else ""
        logger.info(
            "pi %s: prompted %s with %d characters (%s)", self.name, ref.runtime_id, len(message), scope.correlation_id
        )
        return SendResult(delivered=True, provider_message_id=entry_id or ref.runtime_id, replayed=False)

    def steer(self, ref: RuntimeRef, message: str, scope: Scope) -> None:
        """Queue ``message`` for delivery after the running turn's tool calls (RPC ``steer``)."""
        self.require(Operation.SEND)
        self._process_for(ref).command({"type": "steer", "message": message})

    def abort(self, ref: RuntimeRef, scope: Scope) -> None:
        """Abort the agent's current operation (RPC ``abort``); the session stays."""
        self.require(Operation.SEND)
        self._process_for(ref).command({"type": "abort"})
        logger.info("pi %s: aborted the turn of %s (%s)", self.name, ref.runtime_id, scope.correlation_id)

    def attach(self, ref: RuntimeRef, mode: AttachMode, scope: Scope) -> Attachment:
        mode = AttachMode(mode)
        if mode not in self.capabilities().attach_modes:
            raise self._unsupported(Operation.ATTACH)
        self._path_of(ref)
        return Attachment(ref=ref, mode=mode)

    def detach(self, ref: RuntimeRef, scope: Scope) -> None:
        """Nothing to undo; always safe."""

    def close(self) -> None:
        """Stop every RPC process this instance started."""
        with self._lock:
            processes, self._processes = list(self._processes.values()), {}
        for process in processes:
            process.close()

    # --- files and references ------------------------------------------------------------------------

    def _session_files(self) -> list[tuple[Path, pi_files.Summary]]:
        found: dict[str, tuple[Path, pi_files.Summary]] = {}
        try:
            paths = sorted(self.root.rglob("*.jsonl"))
        except OSError:
            paths = []
        with self._lock:  # forget files that are gone
            for gone in set(self._summaries) - set(paths):
                del self._summaries[gone]
        for path in paths:
            summary = self._summary(path)
            if summary is None:
                continue
            if summary.header.id in found:
                logger.warning("pi %s: two session files share one id; the first one is used", self.name)
                continue
            found[summary.header.id] = (path, summary)
        return sorted(found.values(), key=lambda item: (item[1].header.timestamp, str(item[0])))

    def _summary(self, path: Path) -> pi_files.Summary | None:
        with self._lock:
            summary = self._summaries.get(path)
        header = pi_files.read_header(path)
        if header is None:
            return None
        if summary is None or summary.header != header:
            summary = pi_files.Summary(header=header)
        try:
            summary = pi_files.refresh_summary(path, summary)
        except OSError:
            return None
        with self._lock:
            self._summaries[path] = summary
        return summary

    def _title(self, summary: pi_files.Summary) -> str:
        return summary.name or summary.first_prompt or summary.header.id

    def _session(self, path: Path, summary: pi_files.Summary) -> RuntimeSession:
        ref = RuntimeRef(
            instance=self.name,
            runtime_id=summary.header.id,
            identity={"sessions_dir": str(self.root), "file": str(path.relative_to(self.root))},
        )
        with self._lock:
            process = self._processes.get(summary.header.id)
        return RuntimeSession(
            ref=ref,
            title=self._title(summary),
            status="running" if process is not None and process.alive() else "unknown",
            created_at=pi_files.parse_time(summary.header.timestamp),
            last_activity_at=datetime.fromtimestamp(summary.mtime, tz=UTC),
        )

    def _path_of(self, ref: RuntimeRef) -> Path:
        """The reference's file, after checking it is this instance's, inside its directory, and still
        the session the reference was bound to."""
        identity = ref.identity or {}
        relative = identity.get("file", "")
        parts = Path(relative).parts
        if (
            ref.instance != self.name
            or identity.get("sessions_dir") != str(self.root)
            or not relative.endswith(".jsonl")
            or Path(relative).is_absolute()
            or ".." in parts
        ):
            raise RuntimeNotFound(details={"provider": self.name})
        path = self.root / relative
        try:
            inside = path.resolve().is_relative_to(self.root.resolve())
        except OSError:
            inside = False
        header = pi_files.read_header(path) if inside else None
        if header is None or header.id != ref.runtime_id:
            raise RuntimeNotFound(details={"provider": self.name})
        return path

    def _process_for(self, ref: RuntimeRef) -> RpcProcess:
        path = self._path_of(ref)
        with self._lock:
            self._reap_idle(keep=ref.runtime_id)
            process = self._processes.get(ref.runtime_id)
            if process is not None and process.alive():
                return process
            if process is not None:
                process.close()  # reap the one that exited
            env = {name: os.environ[name] for name in self.passthrough if name in os.environ} | self.env
            process = RpcProcess(
                [*self.executable, "--mode", "rpc", "--session", str(path)],
                cwd=self.cwd,
                env=env,
                timeout=self.timeout,
            )
            self._processes[ref.runtime_id] = process
        logger.info("pi %s: started an RPC process for %s", self.name, ref.runtime_id)
        return process

    def _reap_idle(self, *, keep: str | None = None) -> int:
        """Stop RPC processes idle for ``idle_seconds`` whose agent is not working; call with the lock held
        (so no send can start a second process on the same session meanwhile). Returns how many stopped."""
        if not self.idle_seconds:
            return 0
        now, stopped = time.monotonic(), 0
        for runtime_id, process in list(self._processes.items()):
            if runtime_id == keep or (process.alive() and process.idle_for(now) < self.idle_seconds):
                continue
            if process.alive():
                try:
                    working = bool(process.command({"type": "get_state"}).get("isStreaming"))
                except ProviderError:
                    working = False  # it does not answer: nothing to keep it for
                if working:
                    process.last_used_at = now  # ask again after another idle period, not on every call
                    continue
            del self._processes[runtime_id]
            process.close()
            stopped += 1
            logger.info("pi %s: stopped the idle RPC process of %s", self.name, runtime_id)
        return stopped
