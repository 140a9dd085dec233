"""The tmux runtime provider: sessions of one tmux server on a private socket, addressed exactly.

Targets are tmux ids and references pin the server, so a restarted server's recycled id is never taken for
the old session; every pane's output is copied to a log so the stream is exact and survives restarts of
Tess. Options, the stream and what is not promised: README, "Runtime providers".
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import shlex
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from tess_site.scope import Scope

from .contract import (
    AgentObservation,
    AgentRuntimeProvider,
    ApprovalRequired,
    Attachment,
    AttachMode,
    Capabilities,
    Operation,
    ProviderConflict,
    ProviderError,
    ProviderHealth,
    ProviderUnavailable,
    RuntimeNode,
    RuntimeNotFound,
    RuntimeRef,
    RuntimeSession,
    Screen,
    SendResult,
    StreamPage,
    TerminalProvider,
)
from .pane_log import CLOSED_SUFFIX, LOG_SUFFIX, encode_cursor, read_logs
from .tmux_cli import SEND_KEYS_CHUNK, TmuxCli, TmuxServerGone, parse_rows, row_format
from .tmux_state import PaneFacts, PaneRules, classify

logger = logging.getLogger(__name__)

PANE_FIELDS = (
    "pid",
    "session_id",
    "session_created",
    "session_attached",
    "window_id",
    "window_index",
    "window_active",
    "window_activity",
    "pane_id",
    "pane_index",
    "pane_active",
    "pane_dead",
    "pane_dead_status",
    "pane_dead_signal",
    "pane_pipe",
    "pane_current_command",
    "session_name",
    "window_name",
    "cursor_y",
)
_SESSION_ID = re.compile(r"\$\d{1,9}")
_DIGITS = re.compile(r"\d{1,20}")
_UNSAFE_NAME = re.compile(r"[^\w@+=,-]+")
HOOK_INDEX = 77  # our slot in tmux's hook arrays; any other index is someone else's
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
# Once a session is gone and its logs have not grown for this long, a writer that never marked its log
# closed (killed) will not write again either.
QUIET_SECONDS = 10.0
# A screen is read again (at most this many times) while the pane's log grows across the reading.
SCREEN_ATTEMPTS = 5
SCREEN_SETTLE_SECONDS = 0.01


@dataclass
class _Watch:
    checked_at: float
    alive: bool


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _timestamp(value: str) -> datetime | None:
    return datetime.fromtimestamp(int(value), tz=UTC) if value.isdigit() else None


def _command_args(command: Any, instance: str) -> list[str]:
    if command in (None, "", []):
        return []
    parts = [command] if isinstance(command, str) else command
    if not isinstance(parts, list) or not all(isinstance(part, str) and part for part in parts):
        raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{instance!r}]['command'] must be a string or a list.")
    if any(part.rstrip().endswith(";") for part in parts):
        # tmux would read a trailing ";" as the end of its own command.
        raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{instance!r}]['command'] must not end with ';'.")
    return list(parts)


def _sent_marker(idempotency_key: str) -> str:
    """The session option that says the message with ``idempotency_key`` was typed (a digest: any key fits)."""
    return "@tess-sent-" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]


def _literal(text: str) -> str:
    """``text`` as one tmux argument that stays literal: tmux ends a command at an argument ending in ``;``
    (dropping it) and turns a final ``\\;`` into ``;``, so a final ``;`` is sent as ``\\;``."""
    return text[:-1] + "\\;" if text.endswith(";") else text


class TmuxProvider(AgentRuntimeProvider, TerminalProvider):
    """A named tmux instance. Thread-safe; one instance per name (``registry.get_provider``)."""

    kind = "tmux"
    default_debounce = 1.0

    def __init__(self, *, name: str, config: dict[str, Any]) -> None:
        super().__init__(name=name, config=config)
        socket = config.get("socket")
        if not socket or not isinstance(socket, str):
            raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{name!r}] needs a 'socket' path.")
        var_tmux = Path(settings.VAR_DIR) / "tmux"
        self.socket = (var_tmux / Path(socket).expanduser()).absolute()
        if len(str(self.socket).encode()) > MAX_SOCKET_PATH:
            raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{name!r}]['socket'] is too long for a unix socket.")
        self.log_root = (var_tmux / Path(config.get("log_dir") or name).expanduser()).absolute()
        self.command = _command_args(config.get("command"), name)
        self.refresh_seconds = float(config.get("refresh_seconds", 5.0))
        self.cli = TmuxCli(
            socket=self.socket,
            binary=str(config.get("binary", "tmux")),
            timeout=float(config.get("timeout", 5.0)),
        )
        self._watches: dict[tuple[str, str, str], _Watch] = {}
        self._lock = threading.Lock()
        self.pane_rules = PaneRules.from_config(config, name)

    # --- what it offers ------------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        operations = set(Operation) if self.command else set(Operation) - {Operation.START}
        return Capabilities(
            kind=self.kind,
            instance=self.name,
            operations=frozenset(operations),
            attach_modes=frozenset({AttachMode.READ_ONLY, AttachMode.INTERACTIVE}),
            cursor="byte offsets into each pane's output log",
        )

    def health(self) -> ProviderHealth:
        """Heartbeat: the server answers (and its pid), pane liveness, the latest output activity.

        No server on the socket is healthy: tmux exits with its last session, so it means no sessions.
        A server that does not answer in time, or tmux that cannot run, is not.
        """
        base: dict[str, Any] = {"socket": str(self.socket)}
        try:
            rows = self._all_panes(missing_server_ok=False)
        except TmuxServerGone:
            return ProviderHealth(
                ok=True,
                kind=self.kind,
                instance=self.name,
                detail={**base, "server_alive": False, "sessions": 0, "panes": 0},
                heartbeat_at=datetime.now(tz=UTC),
            )
        except ProviderError as exc:
            return ProviderHealth(
                ok=False, kind=self.kind, instance=self.name, detail={**base, "server_alive": False, "error": exc.code}
            )
        activity = [stamp for stamp in (_timestamp(row["window_activity"]) for row in rows) if stamp]
        detail = {
            **base,
            "server_alive": True,
            "server_pid": int(rows[0]["pid"]) if rows else None,
            "sessions": len({row["session_id"] for row in rows}),
            "panes": len(rows),
            "dead_panes": sum(row["pane_dead"] == "1" for row in rows),
            "piped_panes": sum(row["pane_pipe"] == "1" for row in rows),
            "last_activity_at": max(activity).isoformat() if activity else None,
        }
        return ProviderHealth(
            ok=True, kind=self.kind, instance=self.name, detail=detail, heartbeat_at=datetime.now(UTC)
        )

    # --- reads ---------------------------------------------------------------------------------------

    def list_sessions(self, scope: Scope) -> list[RuntimeSession]:
        """Every session on this instance's socket (none when no server runs); starts their output copies."""
        rows = self._all_panes(missing_server_ok=True)
        self._ensure_pipes(rows)
        return [self._session(panes) for panes in self._by_session(rows).values()]

    def get_session_tree(self, scope: Scope, ref: RuntimeRef | None = None) -> list[RuntimeNode]:
        """Session → windows → panes (in tmux's index order), with the active flags; one session or all."""
        rows = self._all_panes(missing_server_ok=True) if ref is None else self._panes_of(ref)
        nodes = []
        for panes in self._by_session(rows).values():
            windows: dict[str, list[dict[str, str]]] = {}
            for row in sorted(panes, key=lambda r: (int(r["window_index"]), int(r["pane_index"]))):
                windows.setdefault(row["window_id"], []).append(row)
            children = tuple(
                RuntimeNode(
                    id=window_id,
                    kind="window",
                    title=window_rows[0]["window_name"],
                    active=window_rows[0]["window_active"] == "1",
                    children=tuple(
                        RuntimeNode(
                            id=row["pane_id"],
                            kind="pane",
                            title=row["pane_current_command"],
                            active=row["pane_active"] == "1",
                        )
                        for row in window_rows
                    ),
                )
                for window_id, window_rows in windows.items()
            )
            first = panes[0]
            nodes.append(
                RuntimeNode(
                    id=first["session_id"],
                    kind="session",
                    title=first["session_name"],
                    active=first["session_attached"] != "0",
                    children=children,
                )
            )
        return nodes

    def stream_session(self, ref: RuntimeRef, cursor: str | None, scope: Scope, *, limit: int = 65536) -> StreamPage:
        """Output after ``cursor`` (see ``pane_log``), one chunk per pane with new bytes, ``source`` = pane.

        ``ended`` once the session is gone and everything its panes wrote has been returned.
        """
        self._check_ref(ref)
        alive = self._refresh(ref)
        directory = self._session_dir(ref)
        page = read_logs(directory, cursor, limit)
        ended = not alive and page.drained and (page.closed or self._quiet(directory))
        return StreamPage(chunks=page.chunks, next_cursor=page.next_cursor, ended=ended)

    def agent_state(self, ref: RuntimeRef, scope: Scope) -> AgentObservation:
        """The active pane's state from its exit status, output activity, foreground command and screen
        (``tmux_state``). A session that is gone raises ``RuntimeNotFound``; its stream ends it."""
        rows = self._panes_of(ref)
        row = next((r for r in rows if r["window_active"] == "1" and r["pane_active"] == "1"), rows[0])
        dead = row["pane_dead"] == "1"
        screen: list[str] = []
        if not dead:
            screen = self.cli.run("capture-pane", "-p", "-t", row["pane_id"]).split("\n")
        elif not row["pane_dead_status"] and not row["pane_dead_signal"]:
            row = {**row, **self._collect_exit(row["pane_id"])}
        try:
            written = (self._session_dir(ref) / f"{row['pane_id']}{LOG_SUFFIX}").stat().st_mtime
            quiet_for: float | None = max(time.time() - written, 0.0)
        except OSError:
            quiet_for = None
        facts = PaneFacts(
            dead=dead,
            dead_status=row["pane_dead_status"],
            dead_signal=row["pane_dead_signal"],
            command=row["pane_current_command"],
            screen=screen,
            cursor_y=int(row["cursor_y"]) if row["cursor_y"].isdigit() else -1,
            quiet_for=quiet_for,
        )
        return classify(facts, self.pane_rules)

    def _collect_exit(self, pane_id: str) -> dict[str, str]:
        """How a dead pane ended, once tmux has reaped its process.

        tmux learns a pane's exit status when it reaps the process on ``SIGCHLD``, and it now and then
        misses one: the pane then reads dead with no status, its process a zombie, until some other child
        of the server exits (seen for over ten seconds with twenty busy panes). A ``run-shell`` job is such
        a child: the server reaps every exited child when the job ends, and only then runs the next command.
        """
        fields = ("pane_dead_status", "pane_dead_signal")
        out = self.cli.run("run-shell", "true", ";", "display-message", "-p", "-t", pane_id, row_format(fields))
        rows = parse_rows(out, fields)
        return rows[0] if rows else {}

    def screen_snapshot(self, ref: RuntimeRef, scope: Scope) -> Screen:
        """The active pane's screen now (``capture-pane -e``: colours and attributes), with its size, cursor
        and whether the alternate screen (a full-screen program's) is on; one tmux command, so they agree.

        The pane's log is measured first: tmux draws output on the screen before it copies it to the log, so
        every byte up to that offset is on the screen, and a viewer draws only what comes after it.
        """
        rows = self._panes_of(ref)
        self._ensure_pipes(rows)
        pane = self._active_pane(rows)
        log = self._session_dir(ref) / f"{pane}{LOG_SUFFIX}"
        fields = ("pane_width", "pane_height", "cursor_x", "cursor_y", "alternate_on", "cursor_flag")
        for _attempt in range(SCREEN_ATTEMPTS):
            offset = _size(log)
            out = self.cli.run(
                *("display-message", "-p", "-t", pane, row_format(fields), ";"),
                *("capture-pane", "-p", "-e", "-N", "-t", pane),
            )
            # Output that reached the screen just before the capture may still be on its way to the log:
            # a screen taken while the log grew is taken again, so the offset matches what it shows.
            time.sleep(SCREEN_SETTLE_SECONDS)
            if _size(log) == offset:
                break
        head, _, body = out.partition("\n")
        facts = parse_rows(head, fields)
        if not facts:
            raise ProviderError("tmux did not describe the pane.", details={"pane": pane})
        size = {key: int(value) if value.isdigit() else 0 for key, value in facts[0].items()}
        cols, height = max(size["pane_width"], 1), max(size["pane_height"], 1)
        lines = body.split("\n")[:height]
        alternate = size["alternate_on"] == 1
        # Normal or alternate screen as the pane has it, default attributes, no scroll region, cleared.
        parts = ["\x1b[?1049h" if alternate else "\x1b[?1049l", "\x1b[0m\x1b[r\x1b[H\x1b[2J"]
        parts += [f"\x1b[{number};1H{text}" for number, text in enumerate(lines, start=1)]
        parts.append(f"\x1b[0m\x1b[{size['cursor_y'] + 1};{size['cursor_x'] + 1}H")
        parts.append("\x1b[?25h" if size["cursor_flag"] else "\x1b[?25l")
        return Screen(
            source=pane,
            cursor=encode_cursor({pane: offset}),
            cols=cols,
            rows=height,
            cursor_x=size["cursor_x"],
            cursor_y=size["cursor_y"],
            alternate=alternate,
            data="".join(parts),
        )

    # --- actions -------------------------------------------------------------------------------------

    def send_message(self, ref: RuntimeRef, message: str, idempotency_key: str, scope: Scope) -> SendResult:
        """Type ``message`` literally into the session's active pane, then Enter: once per key.

        The key is remembered in the tmux session itself (a user option ``@tess-sent-<digest>``), set by the
        same tmux command as the last piece and the Enter, which the server runs whole: a retry whose key is
        already marked types nothing and reports ``replayed`` (a worker that died after typing, before
        recording the delivery). A message longer than one piece (``SEND_KEYS_CHUNK`` characters) goes in
        several commands; a sender that dies between them leaves the key unmarked, and its retry types the
        whole message again. Newlines inside ``message`` are typed as they are (line feeds).
        """
        rows = self._panes_of(ref)
        self._ensure_pipes(rows)
        pane = self._active_pane(rows)
        marker = _sent_marker(idempotency_key)
        if self.cli.run("show-options", "-t", ref.runtime_id, "-v", "-q", marker).strip():
            logger.info("tmux %s: %s already typed into %s (%s)", self.name, marker, pane, scope.correlation_id)
            return SendResult(delivered=True, provider_message_id=pane, replayed=True)
        pieces = [message[start : start + SEND_KEYS_CHUNK] for start in range(0, len(message), SEND_KEYS_CHUNK)]
        for piece in pieces[:-1]:
            self.cli.run("send-keys", "-t", pane, "-l", "--", _literal(piece))
        last = ["send-keys", "-t", pane, "-l", "--", _literal(pieces[-1]), ";"] if pieces else []
        self.cli.run(*last, "send-keys", "-t", pane, "Enter", ";", "set-option", "-t", ref.runtime_id, marker, "1")
        logger.info("tmux %s: sent %d characters to %s (%s)", self.name, len(message), pane, scope.correlation_id)
        return SendResult(delivered=True, provider_message_id=pane, replayed=False)

    def send_keys(self, ref: RuntimeRef, keys: str, idempotency_key: str, scope: Scope) -> SendResult:
        """Type ``keys`` into the active pane as they are (a terminal's keystrokes: ``\\r`` is Enter, escape
        sequences are arrow keys), nothing added; once per key, remembered as ``send_message`` does."""
        rows = self._panes_of(ref)
        self._ensure_pipes(rows)
        pane = self._active_pane(rows)
        marker = _sent_marker(idempotency_key)
        if self.cli.run("show-options", "-t", ref.runtime_id, "-v", "-q", marker).strip():
            return SendResult(delivered=True, provider_message_id=pane, replayed=True)
        pieces = [keys[start : start + SEND_KEYS_CHUNK] for start in range(0, len(keys), SEND_KEYS_CHUNK)] or [""]
        for piece in pieces[:-1]:
            self.cli.run("send-keys", "-t", pane, "-l", "--", _literal(piece))
        self.cli.run(
            *("send-keys", "-t", pane, "-l", "--", _literal(pieces[-1]), ";"),
            *("set-option", "-t", ref.runtime_id, marker, "1"),
        )
        logger.info("tmux %s: typed %d keys into %s (%s)", self.name, len(keys), pane, scope.correlation_id)
        return SendResult(delivered=True, provider_message_id=pane, replayed=False)

    def attach(self, ref: RuntimeRef, mode: AttachMode, scope: Scope) -> Attachment:
        """Both modes are offered; the durable attachment (who, until when) is the caller's record."""
        mode = AttachMode(mode)
        if mode not in self.capabilities().attach_modes:
            raise self._unsupported(Operation.ATTACH)
        self._ensure_pipes(self._panes_of(ref))
        return Attachment(ref=ref, mode=mode)

    def detach(self, ref: RuntimeRef, scope: Scope) -> None:
        """Nothing to undo in tmux; succeeds for a session that has since ended (detaching is always safe)."""
        self._check_ref(ref)

    def terminate(self, ref: RuntimeRef, approval_ref: str, scope: Scope) -> None:
        """Kill the session. The caller has verified ``approval_ref``; an empty one is refused here too."""
        if not approval_ref or not approval_ref.strip():
            raise ApprovalRequired(details={"provider": self.name, "operation": Operation.TERMINATE.value})
        self._panes_of(ref)
        self.cli.run("kill-session", "-t", ref.runtime_id)
        with self._lock:
            self._watches[self._watch_key(ref)] = _Watch(checked_at=time.monotonic(), alive=False)
        logger.info("tmux %s: killed %s (%s)", self.name, ref.runtime_id, scope.correlation_id)

    def start_session(self, scope: Scope, *, title: str) -> RuntimeSession:
        """A new detached session running the configured command, its output copied from the first byte.

        ``pipe-pane`` runs in the same tmux command sequence as ``new-session``, before the server reads
        anything from the new pane, so even a command that prints at once loses nothing.
        """
        if not self.command:
            raise self._unsupported(Operation.START)
        return self.start_command(scope, title=title, argv=self.command)

    def start_command(self, scope: Scope, *, title: str, argv: Sequence[str]) -> RuntimeSession:
        """``start_session`` with a command from Tess's own configuration (the catalog's runtime bootstrap,
        after approval: ``TESS_BOOTSTRAP_COMMANDS``). Never a command a client typed."""
        argv = _command_args(list(argv), self.name)
        self._prepare_log_root()
        self.socket.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        base = (_UNSAFE_NAME.sub("_", title).strip("_") or "tess")[:48]
        fields = ("pid", "session_id", "session_created", "session_name", "pane_id")
        for attempt in range(1, 21):
            name = base if attempt == 1 else f"{base}-{attempt}"
            try:
                out = self._new_session(name, fields, argv)
            except ProviderConflict:
                continue
            rows = parse_rows(out, fields)
            if not rows:
                raise ProviderError("tmux did not say which session it started.")
            row = rows[0]
            self._create_log(row)
            logger.info("tmux %s: started %s (%s)", self.name, row["session_id"], scope.correlation_id)
            return RuntimeSession(
                ref=self._ref_of(row),
                title=row["session_name"],
                status="running",
                created_at=_timestamp(row["session_created"]),
            )
        raise ProviderConflict("Every name tried for the new session is taken.")

    def _new_session(self, name: str, fields: Sequence[str], argv: Sequence[str]) -> str:
        """``new-session`` starts a server when none runs; one still exiting is waited out, briefly."""
        command = (
            *("new-session", "-d", "-P", "-F", row_format(fields), "-s", name, "--", *argv),
            *(";", "pipe-pane", "-o", self._pipe_command()),
            *(";", *self._hook_commands(None)),
        )
        for wait in (0.05, 0.1, 0.2, 0.4):
            try:
                return self.cli.run(*command)
            except TmuxServerGone:
                time.sleep(wait)  # the old server still held the socket while exiting; it is gone in moments
        return self.cli.run(*command)

    # --- identity and targets ------------------------------------------------------------------------

    def _ref_of(self, row: dict[str, str]) -> RuntimeRef:
        return RuntimeRef(
            instance=self.name,
            runtime_id=row["session_id"],
            identity={"socket": str(self.socket), "server_pid": row["pid"], "session_created": row["session_created"]},
        )

    def _check_ref(self, ref: RuntimeRef) -> None:
        """Without asking tmux: the reference belongs to this instance and is well formed."""
        identity = ref.identity or {}
        if (
            ref.instance != self.name
            or identity.get("socket") != str(self.socket)
            or not _SESSION_ID.fullmatch(ref.runtime_id)
            or not _DIGITS.fullmatch(identity.get("server_pid", ""))
            or not _DIGITS.fullmatch(identity.get("session_created", ""))
        ):
            raise RuntimeNotFound(details={"provider": self.name})

    def _panes_of(self, ref: RuntimeRef) -> list[dict[str, str]]:
        """The session's panes, after checking the live session is the one the reference was bound to."""
        self._check_ref(ref)
        rows = parse_rows(
            self.cli.run("list-panes", "-s", "-t", ref.runtime_id, "-F", row_format(PANE_FIELDS)), PANE_FIELDS
        )
        identity = ref.identity
        if not rows or any(
            row["session_id"] != ref.runtime_id
            or row["pid"] != identity["server_pid"]
            or row["session_created"] != identity["session_created"]
            for row in rows
        ):
            raise RuntimeNotFound(details={"provider": self.name})
        return rows

    def _all_panes(self, *, missing_server_ok: bool) -> list[dict[str, str]]:
        try:
            return parse_rows(self.cli.run("list-panes", "-a", "-F", row_format(PANE_FIELDS)), PANE_FIELDS)
        except TmuxServerGone:
            if missing_server_ok:
                return []  # tmux exits with its last session: no server is no sessions
            raise

    @staticmethod
    def _by_session(rows: Sequence[dict[str, str]]) -> dict[str, list[dict[str, str]]]:
        sessions: dict[str, list[dict[str, str]]] = {}
        for row in rows:
            sessions.setdefault(row["session_id"], []).append(row)
        return sessions

    def _session(self, panes: list[dict[str, str]]) -> RuntimeSession:
        first = panes[0]
        activity = [stamp for stamp in (_timestamp(row["window_activity"]) for row in panes) if stamp]
        return RuntimeSession(
            ref=self._ref_of(first),
            title=first["session_name"],
            status="running" if any(row["pane_dead"] == "0" for row in panes) else "exited",
            created_at=_timestamp(first["session_created"]),
            last_activity_at=max(activity) if activity else None,
        )

    @staticmethod
    def _active_pane(rows: Sequence[dict[str, str]]) -> str:
        active = [row for row in rows if row["window_active"] == "1" and row["pane_active"] == "1"] or list(rows)
        if active[0]["pane_dead"] == "1":
            raise ProviderConflict("The session's active pane has exited.")
        return active[0]["pane_id"]

    # --- output copies -------------------------------------------------------------------------------

    def _session_dir(self, ref: RuntimeRef) -> Path:
        identity = ref.identity
        return self.log_root / f"{identity['server_pid']}-{ref.runtime_id}-{identity['session_created']}"

    def _pipe_command(self) -> str:
        """The shell command tmux runs per pane (tmux expands the ``#{…}`` formats for that pane)."""
        root = shlex.quote(str(self.log_root)).replace("#", "##")
        directory = root + "/'#{pid}-#{session_id}-#{session_created}'"
        pane = "\"$d\"/'#{pane_id}'"
        # The ".closed" marker appears only after cat has written its last byte: the end is then exact.
        return (
            f'umask 077; d={directory}; mkdir -p "$d" && rm -f {pane}{CLOSED_SUFFIX}; '
            f"cat >> {pane}{LOG_SUFFIX}; : > {pane}{CLOSED_SUFFIX}"
        )

    def _hook_commands(self, session_id: str | None) -> list[str]:
        """Session hooks that copy a new pane's output from its first byte (tmux runs a hook before it
        reads anything from the new pane). Set at index ``HOOK_INDEX``, so hooks of others are kept.
        ``session_id`` None: the session of the command before (``start_session``'s own sequence).
        """
        # The hook is a tmux command line: inside its double quotes, \ " and $ are tmux's to interpret.
        quoted = self._pipe_command().replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
        target = ["-t", session_id] if session_id else []
        commands: list[str] = []
        for hook in ("after-split-window", "after-new-window"):
            commands += [";", "set-hook", *target, f"{hook}[{HOOK_INDEX}]", f'pipe-pane -o "{quoted}"']
        return commands[1:]

    def _prepare_log_root(self) -> None:
        self.log_root.mkdir(mode=0o700, parents=True, exist_ok=True)

    @contextmanager
    def _pipes_locked(self) -> Iterator[None]:
        """Across processes: ``pipe-pane -o`` toggles, so check-then-pipe must not interleave."""
        self._prepare_log_root()
        with (self.log_root / ".pipes.lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _ensure_pipes(self, rows: Sequence[dict[str, str]]) -> None:
        """Start the output copy of every live pane that has none; a no-op when all are piped."""
        if not any(row["pane_pipe"] == "0" and row["pane_dead"] == "0" for row in rows):
            return
        wanted = {row["pane_id"]: row for row in rows}
        with self._pipes_locked():
            fields = ("pane_id", "pane_pipe", "pane_dead")
            current = parse_rows(self.cli.run("list-panes", "-a", "-F", row_format(fields)), fields)
            hooked: set[str] = set()
            for row in current:
                if row["pane_id"] in wanted and row["pane_pipe"] == "0" and row["pane_dead"] == "0":
                    pane = wanted[row["pane_id"]]
                    self._create_log(pane)
                    try:
                        if pane["session_id"] not in hooked:
                            self.cli.run(*self._hook_commands(pane["session_id"]))
                            hooked.add(pane["session_id"])
                        self.cli.run("pipe-pane", "-o", "-t", row["pane_id"], self._pipe_command())
                    except RuntimeNotFound:
                        continue  # the pane or its session closed meanwhile

    def _create_log(self, row: dict[str, str]) -> None:
        """Make the pane's log before its writer starts: a stream that finds no log yet must not end."""
        directory = self._session_dir(self._ref_of(row))
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(directory / f"{row['pane_id']}{LOG_SUFFIX}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))

    def _watch_key(self, ref: RuntimeRef) -> tuple[str, str, str]:
        return (ref.runtime_id, ref.identity["server_pid"], ref.identity["session_created"])

    def _refresh(self, ref: RuntimeRef) -> bool:
        """Is the session alive? Asks tmux at most once per ``refresh_seconds`` (and never again once gone)."""
        key = self._watch_key(ref)
        with self._lock:
            watch = self._watches.get(key)
        if watch is not None and (not watch.alive or time.monotonic() - watch.checked_at < self.refresh_seconds):
            return watch.alive
        try:
            self._ensure_pipes(self._panes_of(ref))
            alive = True
        except (RuntimeNotFound, TmuxServerGone):
            alive = False
        except ProviderUnavailable:
            return watch.alive if watch is not None else True  # unknown is not "ended"; the logs still read
        except ProviderError:
            logger.warning("tmux %s: could not check the output copies of %s", self.name, ref.runtime_id)
            alive = True
        with self._lock:
            self._watches[key] = _Watch(checked_at=time.monotonic(), alive=alive)
        return alive

    @staticmethod
    def _quiet(directory: Path) -> bool:
        """No log of a gone session has grown for ``QUIET_SECONDS`` (a writer was killed before its marker)."""
        newest = max((path.stat().st_mtime for path in directory.glob(f"*{LOG_SUFFIX}")), default=0.0)
        return time.time() - newest > QUIET_SECONDS
