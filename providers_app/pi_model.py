"""The ``pi`` model adapter: Tess's own answers phrased through ``pi --mode rpc --no-tools`` (seed 001 deploys
Tess as a pi agent on GPT-5.6 Sol, reasoning high). Separate from the pi runtime provider (``pi.py``), which
drives other pi agents as sessions; this reuses its RPC client (``pi_rpc.RpcProcess``).

What Tess writes, all under ``TESS_PI_MODEL_DIR`` (default ``var/pi-model/``), never the user's ``~/.pi``:

- ``agent/``: pi's agent dir (``PI_CODING_AGENT_DIR``). ``models.json`` names one OpenAI-compatible provider
  ``tess`` at ``TESS_MODEL_BASE_URL`` with the model ``TESS_MODEL``; its ``apiKey`` names an environment
  variable that only the pi process is given, so the key is never written to disk (and a key starting with
  ``!`` is never run as a command, as pi would a literal one). ``settings.json`` turns pi's own retries off (the
  gateway falls back at once instead of keeping the operator waiting). The stable prefix is pi's system
  prompt, from a file named by its hash.
- ``sessions/<tess session id>.jsonl``: one pi session file per Tess session, so pi's replay and compaction
  apply. When it does not exist (the first turn, or after ``pi_conversation_reset``), Tess writes it from the
  prompt's conversation (its turns as user and assistant messages; its summary and in-between lines as
  messages pi passes on as context but that are not the operator's words; a conversation with no reply yet goes
  with the turn's text instead, as pi writes a file only once it holds a reply); when it exists, only what is new
  is sent: the conversation's messages since pi's last turn (turns answered without pi: an action, a fallback)
  are appended, then the turn goes to pi as one user message, the dynamic section first, then the operator's
  text. ``<id>.state.json`` holds pi's last turn (its user text and reply) to find that place; when the
  conversation no longer shows it (edited, forgotten, or a failed turn), the file is written again from the
  conversation, which is Tess's truth.

A session's pi process is kept after its turn for the next one (``TESS_PI_KEEP_SECONDS``, 600; at most
``TESS_PI_KEEP_MAX``, 4, per worker process, the least recently used closed first: each holds about 140 MB),
since pi's start costs a second or more on a quiet machine. The session file stays the only truth: a kept
process answers only when the file is exactly as its last turn left it (inode, size, mtime); when another
gunicorn worker took a turn, Tess appended turns answered without pi, or a reset wrote it again, a new process
reads the file, so any worker can take any turn. ``TESS_PI_KEEP_SECONDS=0`` runs a process per turn. Turns
of one Tess session are serialised by an exclusive ``flock`` on ``<id>.lock``, across threads and worker
processes; a failed or stopped turn closes its process.

No pi tool can run: ``--no-tools`` (none is offered to the model, and a call the model asks for anyway is
answered "not found"), with extensions, skills, prompt templates, themes and context files off, and the
process starts in an empty directory. pi's streaming text deltas become ``on_delta``; a set ``cancel`` sends
pi's ``abort`` (pi closes the HTTP request) and raises ``ModelStopped`` with the text so far; pi's reported
usage (its assistant messages' ``usage``) becomes ``ModelReply.usage``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import queue
import secrets
import shlex
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from django.conf import settings

from .contract import ProviderUnavailable
from .model_adapters import (
    ModelError,
    ModelReply,
    ModelRequest,
    ModelStopped,
    ModelTimeout,
    ModelUnavailable,
    ModelUsage,
    Prompt,
)
from .pi_rpc import RpcProcess

logger = logging.getLogger(__name__)

PROVIDER = "tess"  # the provider's name in the models.json Tess writes
KEY_ENV = "TESS_PI_MODEL_API_KEY"  # the variable models.json names for the key; set only for the pi process
CUSTOM_TYPE = "tess"  # the customType of the context messages Tess writes into a pi session file
# Tess's reasoning levels as pi's thinking levels.
THINKING = {"none": "off", "low": "low", "medium": "medium", "high": "high"}
# What the pi process inherits from Tess's environment: enough to run, never Tess's own secrets.
BASE_ENV = ("PATH", "LANG", "LC_ALL", "TMPDIR", "USER")
NO_TOOLS_ARGS = (
    "--no-tools",
    "--no-extensions",
    "--no-skills",
    "--no-prompt-templates",
    "--no-themes",
    "--no-context-files",
)
ABORT_GRACE_SECONDS = 5.0  # after an abort, how long pi may take to end the turn before it is killed
EXIT_SECONDS = 5.0  # after a turn, how long pi may take to exit once its stdin is closed
LOCK_POLL_SECONDS = 0.05
OPERATOR_LABEL = "## The operator's message"
EARLIER_LABEL = "## Earlier in this conversation"


@dataclass(frozen=True)
class _Paths:
    session: Path
    state: Path
    lock: Path
    reset: Path


def _root() -> Path:
    return Path(settings.TESS_PI_MODEL_DIR).absolute()


def _paths(root: Path, tess_session_id: str) -> _Paths:
    """The files of one Tess session; the id must be a UUID, so it can name no other path."""
    name = str(uuid.UUID(str(tess_session_id)))
    sessions = root / "sessions"
    return _Paths(
        session=sessions / f"{name}.jsonl",
        state=sessions / f"{name}.state.json",
        lock=sessions / f"{name}.lock",
        reset=sessions / f"{name}.reset",
    )


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it already holds it; readers see the old file or the new one."""
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8") == text:
            return
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _remove(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def _locked(path: Path, *, deadline: float | None, cancel: threading.Event | None) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path`` (another thread or process holding it makes this wait).
    With ``deadline`` None, do not wait: yield False when it is taken. The lock file is never removed (a
    removed lock file would let two holders lock two different files)."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is None:
                    yield False
                    return
                if cancel is not None and cancel.is_set():
                    raise ModelStopped("") from None
                if time.monotonic() >= deadline:
                    raise ModelTimeout(details={"adapter": PiModelAdapter.name, "waiting": "session"}) from None
                time.sleep(LOCK_POLL_SECONDS)
        yield True
    finally:
        os.close(descriptor)  # and with it the lock


def pi_conversation_reset(tess_session_id: str) -> bool:
    """Forget pi's copy of a Tess session's conversation (when a memory is forgotten, say): its next turn
    starts again from Tess's own conversation, as redacted by then. True when there was a copy to forget.

    A turn of that session under way is not waited for: a ``.reset`` mark is left, and the next turn honours
    it before it starts pi, so nothing the running turn writes survives either."""
    paths = _paths(_root(), tess_session_id)
    _KEPT.drop(str(uuid.UUID(tess_session_id)))  # this worker's pi process holds the conversation in memory
    if not paths.session.parent.is_dir():
        return False
    existed = paths.session.exists()
    paths.reset.touch(mode=0o600)
    with _locked(paths.lock, deadline=None, cancel=None) as held:
        if held:
            _remove(paths.session, paths.state, paths.reset)
    logger.info("pi model: the conversation of session %s was reset (%s)", tess_session_id, existed)
    return existed or not held


# --- pi session files ----------------------------------------------------------------------------------


def _now() -> tuple[str, int]:
    moment = datetime.now(UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"), int(moment.timestamp() * 1000)


def _entries(messages: Sequence[dict[str, str]], *, parent: str | None, taken: set[str], model: str) -> list[str]:
    """pi session entries for Tess's conversation messages, chained from ``parent``: the operator's turns as
    user messages, Tess's as assistant messages, anything else (a summary, a line about what happened between
    turns) as a context message pi passes to the model as the user's side, labelled as Tess wrote it."""
    lines: list[str] = []
    for message in messages:
        content = str(message.get("content") or "")
        if not content.strip():
            continue
        entry_id = secrets.token_hex(4)
        while entry_id in taken:
            entry_id = secrets.token_hex(4)
        taken.add(entry_id)
        stamp, millis = _now()
        base: dict[str, Any] = {"id": entry_id, "parentId": parent, "timestamp": stamp}
        role = message.get("role")
        if role == "user":
            body = {"role": "user", "content": [{"type": "text", "text": content}], "timestamp": millis}
            entry = {"type": "message", **base, "message": body}
        elif role == "assistant":
            body = {
                "role": "assistant",
                "content": [{"type": "text", "text": content}],
                "api": "openai-completions",
                "provider": PROVIDER,
                "model": model,
                "usage": _ZERO_USAGE,
                "stopReason": "stop",
                "timestamp": millis,
            }
            entry = {"type": "message", **base, "message": body}
        else:
            entry = {"type": "custom_message", **base, "customType": CUSTOM_TYPE, "content": content, "display": False}
        lines.append(json.dumps(entry, ensure_ascii=False))
        parent = entry_id
    return lines


_ZERO_COST = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
_ZERO_USAGE = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0, "cost": _ZERO_COST}


def _seed(path: Path, conversation: Sequence[dict[str, str]], *, model: str, cwd: Path) -> list[dict[str, str]]:
    """Write a new pi session file holding ``conversation`` (atomically: pi never sees half of it).

    pi writes a session file only once it holds an assistant message, and then appends every entry it has,
    header included, to the file: so a conversation without a reply in it is not written (pi makes the file
    at its first reply), and its messages are returned to go with the turn's own text instead."""
    _remove(path)
    messages = [m for m in conversation if str(m.get("content") or "").strip()]
    if not any(m.get("role") == "assistant" for m in messages):
        return messages
    stamp, _ = _now()
    header = {"type": "session", "version": 3, "id": str(uuid.uuid4()), "timestamp": stamp, "cwd": str(cwd)}
    lines = [json.dumps(header), *_entries(messages, parent=None, taken=set(), model=model)]
    _write_atomically(path, "\n".join(lines) + "\n")
    return []


def _append(path: Path, messages: Sequence[dict[str, str]], *, model: str) -> None:
    """Append ``messages`` after the file's last entry (pi's leaf when it loads the file)."""
    if not messages:
        return
    taken: set[str] = set()
    leaf: str | None = None
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry.get("type") != "session":
                    taken.add(entry["id"])
                    leaf = entry["id"]
    lines = _entries(messages, parent=leaf, taken=taken, model=model)
    if lines:
        with path.open("a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")


def _since(conversation: Sequence[dict[str, str]], state: dict[str, Any]) -> list[dict[str, str]] | None:
    """The conversation's messages after pi's last turn (its user text, then a reply pi's begins with: the
    whole reply, or what was kept of a stopped one), or None when the conversation no longer shows that turn."""
    user, reply = state.get("user"), state.get("reply")
    if not isinstance(user, str) or not isinstance(reply, str):
        return None
    for index in range(len(conversation) - 1, -1, -1):
        message = conversation[index]
        if message.get("role") != "user" or message.get("content") != user:
            continue
        rest = list(conversation[index + 1 :])
        if rest and rest[0].get("role") == "assistant":
            if not reply.startswith(str(rest[0].get("content") or "").rstrip()):
                return None  # that turn was answered by something else (a fallback): pi's copy differs
            rest = rest[1:]
        return rest
    return None


def _read_state(path: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def turn_text(prompt: Prompt, earlier: Sequence[dict[str, str]] = ()) -> str:
    """The one user message a turn sends pi: what came before it that is in no pi file (``_seed``), the
    dynamic section (live state, memory, retrieved context), then the operator's text under its own heading."""
    parts = []
    if earlier:
        who = {"user": "Operator", "assistant": "Tess"}
        lines = [f"- {who.get(m.get('role', ''), 'Meanwhile')}: {m.get('content', '')}" for m in earlier]
        parts.append(EARLIER_LABEL + "\n" + "\n".join(lines))
    if prompt.dynamic:
        parts.append(prompt.dynamic)
    if not parts:
        return prompt.user_text
    return "\n\n".join(parts) + f"\n\n{OPERATOR_LABEL}\n{prompt.user_text}"


# --- the adapter ---------------------------------------------------------------------------------------


@dataclass
class _Turn:
    """What pi reported for one prompt."""

    parts: list[str]
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: Decimal = Decimal(0)
    stop_reason: str = ""
    error_message: str = ""
    ended: bool = False

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def usage(self) -> ModelUsage | None:
        if not (self.input_tokens or self.output_tokens):
            return None  # nothing reported (an endpoint without streamed usage, or a turn stopped early)
        return ModelUsage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read,
            cache_write_tokens=self.cache_write,
            # pi prices from models.json, which Tess writes without prices: a zero is "not reported".
            cost=self.cost or None,
        )

    def add_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        self.input_tokens += _int(usage.get("input"))
        self.output_tokens += _int(usage.get("output"))
        self.cache_read += _int(usage.get("cacheRead"))
        self.cache_write += _int(usage.get("cacheWrite"))
        cost = usage.get("cost")
        if isinstance(cost, dict):
            with contextlib.suppress(InvalidOperation):
                self.cost += Decimal(str(cost.get("total") or 0))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _assistant_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if not isinstance(content, list):
        return ""
    return "".join(
        str(part.get("text", "")) for part in content if isinstance(part, dict) and part.get("type") == "text"
    )


class PiModelAdapter:
    """Tess's answers through ``pi --mode rpc --no-tools``, one pi session file per Tess session."""

    name = "pi"

    def __init__(
        self,
        *,
        executable: Sequence[str],
        root: Path,
        base_url: str | None,
        api_key: str | None,
        model: str,
        reasoning_effort: str,
        timeout: float,
        context_tokens: int,
        keep_seconds: float = 0.0,
        keep_max: int = 0,
    ) -> None:
        self.executable = list(executable)
        self.root = root
        self.base_url = base_url
        self.api_key = api_key
        self.model = model
        self.thinking = THINKING.get(reasoning_effort, "high")
        self.timeout = timeout
        self.context_tokens = context_tokens
        self.keep_seconds = keep_seconds if keep_max > 0 else 0.0
        self.keep_max = keep_max

    @classmethod
    def from_settings(cls) -> PiModelAdapter:
        return cls(
            executable=shlex.split(settings.TESS_PI_EXECUTABLE or "pi"),
            root=_root(),
            base_url=settings.TESS_MODEL_BASE_URL,
            api_key=settings.TESS_MODEL_API_KEY,
            model=settings.TESS_MODEL or "gpt-5.6-sol",
            reasoning_effort=settings.TESS_REASONING_LEVEL,
            timeout=float(settings.TESS_MODEL_TIMEOUT_SECONDS),
            context_tokens=int(settings.TESS_PI_CONTEXT_TOKENS),
            keep_seconds=float(settings.TESS_PI_KEEP_SECONDS),
            keep_max=int(settings.TESS_PI_KEEP_MAX),
        )

    # --- what Tess writes for pi ---------------------------------------------------------------------

    def write_agent_dir(self) -> Path:
        """pi's agent dir with Tess's ``models.json`` and ``settings.json``; written only when they change."""
        agent = _private_dir(self.root / "agent")
        model = {
            "id": self.model,
            "name": self.model,
            "reasoning": self.thinking != "off",
            "input": ["text"],
            "contextWindow": self.context_tokens,
        }
        provider = {"baseUrl": self.base_url, "api": "openai-completions", "apiKey": KEY_ENV, "models": [model]}
        _write_atomically(agent / "models.json", json.dumps({"providers": {PROVIDER: provider}}, indent=2) + "\n")
        pi_settings = {"quietStartup": True, "retry": {"enabled": False}, "compaction": {"enabled": True}}
        _write_atomically(agent / "settings.json", json.dumps(pi_settings, indent=2) + "\n")
        return agent

    def _system_prompt_file(self, agent: Path, stable_prefix: str) -> Path:
        digest = hashlib.sha256(stable_prefix.encode()).hexdigest()[:24]
        path = agent / f"system-{digest}.md"
        if not path.exists():
            _write_atomically(path, stable_prefix)
        return path

    def _env(self, agent: Path) -> dict[str, str]:
        env = {name: os.environ[name] for name in BASE_ENV if name in os.environ}
        return env | {
            "HOME": str(_private_dir(self.root / "home")),  # nothing of the user's home, ~/.pi included
            "PI_CODING_AGENT_DIR": str(agent),
            "PI_OFFLINE": "1",  # no start-up network calls (version checks)
            "PI_TELEMETRY": "0",
            KEY_ENV: self.api_key or "not-configured",
        }

    # --- a turn --------------------------------------------------------------------------------------

    def complete(self, request: ModelRequest) -> ModelReply:
        if not self.base_url:
            raise ModelUnavailable(
                "No model endpoint is configured (TESS_MODEL_BASE_URL).", details={"adapter": self.name}
            )
        deadline = time.monotonic() + self.timeout
        agent = self.write_agent_dir()
        system_file = self._system_prompt_file(agent, request.prompt.stable_prefix)
        sessions = _private_dir(self.root / "sessions")
        session_id = _tess_session_of(request)
        if session_id is None:
            # No Tess session (a conversation summary, say): a pi file of its own for this call only.
            scratch = Path(tempfile.mkdtemp(dir=sessions, prefix="once-"))
            try:
                path = scratch / "once.jsonl"
                earlier = _seed(path, request.prompt.conversation, model=self.model, cwd=self._work())
                once, kept = self._run(request, self._argv(path, system_file), agent, deadline, earlier)
                kept.close()
                return once.reply(self)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        _KEPT.reap(keep_seconds=self.keep_seconds, keep_max=self.keep_max)
        paths = _paths(self.root, session_id)
        with _locked(paths.lock, deadline=deadline, cancel=request.cancel):
            earlier = self._prepare(paths, request.prompt)
            argv = self._argv(paths.session, system_file)
            # The kept process holds the session as its last turn left it: it may answer only if nobody (another
            # worker, a catch-up, a reset) changed the file since.
            taken = _KEPT.take(session_id, launch=self._launch(argv), signature=_signature(paths.session))
            try:
                result, kept = self._run(request, argv, agent, deadline, earlier, taken)
            except ModelStopped as stopped:
                state = {"user": request.prompt.user_text, "reply": stopped.text}
                _write_atomically(paths.state, json.dumps(state))
                raise
            except ModelError:
                # pi's copy now ends in a turn Tess answers otherwise (the fallback): write it again next time.
                _remove(paths.session, paths.state)
                raise
            _write_atomically(paths.state, json.dumps({"user": request.prompt.user_text, "reply": result.text}))
            if self.keep_seconds > 0:
                _KEPT.put(session_id, kept, signature=_signature(paths.session))
                _KEPT.reap(keep_seconds=self.keep_seconds, keep_max=self.keep_max)
            else:
                kept.close()
        return result.reply(self)

    def _work(self) -> Path:
        return _private_dir(self.root / "work")  # pi's working directory: empty, nothing to read or change

    def _prepare(self, paths: _Paths, prompt: Prompt) -> list[dict[str, str]]:
        """Bring the session's pi file up to the conversation before the turn (see the module's docstring);
        returns what of the conversation goes with the turn's text instead (``_seed``)."""
        if paths.reset.exists():
            _remove(paths.session, paths.state, paths.reset)
        if paths.session.exists():
            state = _read_state(paths.state)
            since = _since(prompt.conversation, state) if state is not None else None
            if since is not None:
                _append(paths.session, since, model=self.model)
                return []
            logger.info("pi model: %s no longer matches the conversation; written again from it", paths.session.name)
        return _seed(paths.session, prompt.conversation, model=self.model, cwd=self._work())

    def _launch(self, argv: list[str]) -> tuple[str, ...]:
        """What a kept process must have been started with to answer: the same command line, endpoint, key and
        model (a changed key or endpoint takes effect at the next turn, not when the process is reaped)."""
        given = json.dumps([self.base_url, self.api_key, self.model, self.thinking, self.context_tokens])
        return (*argv, hashlib.sha256(given.encode()).hexdigest())

    def _argv(self, session_file: Path, system_file: Path) -> list[str]:
        return [
            *self.executable,
            "--mode",
            "rpc",
            *NO_TOOLS_ARGS,
            "--provider",
            PROVIDER,
            "--model",
            self.model,
            "--thinking",
            self.thinking,
            "--system-prompt",
            str(system_file),
            "--session",
            str(session_file),
        ]

    def _run(
        self,
        request: ModelRequest,
        argv: list[str],
        agent: Path,
        deadline: float,
        earlier: Sequence[dict[str, str]] = (),
        kept: _Kept | None = None,
    ) -> tuple[_Result, _Kept]:
        """One turn on ``kept`` (a process kept from this session's last turn) or a new pi process. The process
        is returned to be kept; on any failure it is closed."""
        if kept is None:
            events: queue.Queue[dict[str, Any] | None] = queue.Queue()
            try:
                process = RpcProcess(
                    argv,
                    cwd=str(self._work()),
                    env=self._env(agent),
                    timeout=max(deadline - time.monotonic(), 0.1),
                    on_event=events.put,
                )
            except ProviderUnavailable as exc:
                raise ModelUnavailable(
                    "The pi executable could not be started.", details={"adapter": self.name}
                ) from exc
            kept = _Kept(process=process, events=events, launch=self._launch(argv))
        process, events = kept.process, kept.events
        try:
            process.timeout = max(deadline - time.monotonic(), 0.1)
            try:
                response = process.request({"type": "prompt", "message": turn_text(request.prompt, earlier)})
            except ProviderUnavailable as exc:
                if process.alive() and time.monotonic() >= deadline:
                    raise ModelTimeout(details={"adapter": self.name}) from exc
                logger.warning("pi model: pi exited (status %s) before it took the prompt", process.process.poll())
                raise ModelUnavailable("pi exited before it took the prompt.", details={"adapter": self.name}) from exc
            if not response.get("success"):
                logger.warning("pi model: pi refused the prompt: %s", response.get("error"))
                raise ModelError("pi refused the prompt.", details={"adapter": self.name})
            turn = self._follow(process, events, request, deadline)
            self._settle(process, events, deadline=time.monotonic() + self.timeout)
        except BaseException:
            kept.close()
            raise
        return _Result(text=turn.text, usage=turn.usage()), kept

    def _follow(
        self, process: RpcProcess, events: queue.Queue[dict[str, Any] | None], request: ModelRequest, deadline: float
    ) -> _Turn:
        """pi's events until the end of the turn: text deltas on, usage summed; abort on cancel or deadline."""
        turn = _Turn(parts=[])
        aborted: str = ""  # why Tess aborted the turn: "stopped" or "timeout"
        abort_deadline = 0.0
        while not turn.ended:
            now = time.monotonic()
            if not aborted and request.cancel is not None and request.cancel.is_set():
                aborted, abort_deadline = "stopped", now + ABORT_GRACE_SECONDS
                self._abort(process)
            elif not aborted and now >= deadline:
                aborted, abort_deadline = "timeout", now + ABORT_GRACE_SECONDS
                self._abort(process)
            if aborted and now >= abort_deadline:
                break  # pi did not end the turn: closing the process kills it
            try:
                event = events.get(timeout=LOCK_POLL_SECONDS)
            except queue.Empty:
                continue
            if event is None:
                if aborted:
                    break
                raise ModelUnavailable("pi exited in the middle of the turn.", details={"adapter": self.name})
            self._on_event(event, turn, request)
        if aborted == "stopped":
            raise ModelStopped(turn.text, usage=turn.usage())
        if aborted == "timeout":
            raise ModelTimeout(details={"adapter": self.name})
        if turn.stop_reason == "error":
            raise _error_of(turn.error_message)
        if turn.stop_reason == "aborted":
            raise ModelError("pi aborted the turn.", details={"adapter": self.name})
        if not turn.text.strip():
            raise ModelError("The model returned an empty answer.", details={"adapter": self.name})
        return turn

    @staticmethod
    def _on_event(event: dict[str, Any], turn: _Turn, request: ModelRequest) -> None:
        kind = event.get("type")
        if kind == "message_update":
            update = event.get("assistantMessageEvent")
            if isinstance(update, dict) and update.get("type") == "text_delta":
                delta = str(update.get("delta") or "")
                if delta:
                    turn.parts.append(delta)
                    if request.on_delta is not None:
                        request.on_delta(delta)
        elif kind == "message_end":
            message = event.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                turn.add_usage(message.get("usage"))
                turn.stop_reason = str(message.get("stopReason") or "")
                turn.error_message = str(message.get("errorMessage") or "")
        elif kind == "tool_execution_start":
            # --no-tools: pi answers any call "not found"; said here so a log shows the model asked.
            logger.warning("pi model: the model asked for the tool %r; pi has none to run", event.get("toolName"))
        elif kind == "agent_end":
            turn.ended = True

    def _abort(self, process: RpcProcess) -> None:
        try:
            process.timeout = ABORT_GRACE_SECONDS
            process.request({"type": "abort"})
        except ProviderUnavailable:
            logger.warning("pi model: pi did not take the abort; its process is stopped instead")

    @staticmethod
    def _settle(process: RpcProcess, events: queue.Queue[dict[str, Any] | None], *, deadline: float) -> None:
        """Let a compaction pi starts after the turn finish before its process is closed (pi decides at the
        turn's end, before it reads the next command, so ``get_state`` shows it)."""
        try:
            process.timeout = EXIT_SECONDS
            compacting = bool(process.command({"type": "get_state"}).get("isCompacting"))
        except Exception:  # pi gone or refusing: nothing to wait for
            return
        while compacting and time.monotonic() < deadline:
            try:
                event = events.get(timeout=LOCK_POLL_SECONDS)
            except queue.Empty:
                continue
            if event is None or event.get("type") == "compaction_end":
                return


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


@dataclass
class _Kept:
    """A pi process kept after a session's turn, for its next one."""

    process: RpcProcess
    events: queue.Queue[dict[str, Any] | None]
    launch: tuple[str, ...]  # its command line and what it was given (``PiModelAdapter._launch``)
    signature: tuple[int, int, int] | None = None
    used_at: float = 0.0

    def close(self) -> None:
        self.process.timeout = EXIT_SECONDS
        self.process.close()


class _KeptProcesses:
    """This worker's kept pi processes, one at most per Tess session. A process in use is out of the pool (a
    turn takes it and puts it back), so reaping never stops a turn."""

    def __init__(self) -> None:
        self._kept: dict[str, _Kept] = {}
        self._lock = threading.Lock()

    def take(self, session_id: str, *, launch: tuple[str, ...], signature: tuple[int, int, int] | None) -> _Kept | None:
        with self._lock:
            kept = self._kept.pop(session_id, None)
        if kept is None:
            return None
        if kept.launch == launch and signature is not None and kept.signature == signature and kept.process.alive():
            while not kept.events.empty():  # anything pi said between turns is no part of this one
                kept.events.get_nowait()
            return kept
        kept.close()
        return None

    def put(self, session_id: str, kept: _Kept, *, signature: tuple[int, int, int] | None) -> None:
        kept.signature, kept.used_at = signature, time.monotonic()
        with self._lock:
            previous = self._kept.pop(session_id, None)
            self._kept[session_id] = kept
        if previous is not None:
            previous.close()

    def reap(self, *, keep_seconds: float, keep_max: int) -> None:
        """Close the processes idle longer than ``keep_seconds``, and the least recently used beyond
        ``keep_max`` (each pi process holds about 140 MB)."""
        now = time.monotonic()
        with self._lock:
            by_age = sorted(self._kept.items(), key=lambda item: item[1].used_at, reverse=True)
            gone = [sid for n, (sid, kept) in enumerate(by_age) if n >= keep_max or now - kept.used_at > keep_seconds]
            closing = [self._kept.pop(sid) for sid in gone]
        for kept in closing:
            kept.close()

    def drop(self, session_id: str) -> None:
        with self._lock:
            kept = self._kept.pop(session_id, None)
        if kept is not None:
            kept.close()

    def close_all(self) -> None:
        with self._lock:
            closing, self._kept = list(self._kept.values()), {}
        for kept in closing:
            kept.close()

    def pid_of(self, session_id: str) -> int | None:
        with self._lock:
            kept = self._kept.get(session_id)
        return kept.process.process.pid if kept is not None else None


_KEPT = _KeptProcesses()


def pi_processes_close() -> None:
    """Close every pi process this worker keeps (at exit, and between tests)."""
    _KEPT.close_all()


@dataclass(frozen=True)
class _Result:
    text: str
    usage: ModelUsage | None

    def reply(self, adapter: PiModelAdapter) -> ModelReply:
        return ModelReply(text=self.text, adapter=adapter.name, model=adapter.model, usage=self.usage)


def _tess_session_of(request: ModelRequest) -> str | None:
    session = request.live.get("session") if isinstance(request.live, dict) else None
    identifier = session.get("id") if isinstance(session, dict) else None
    try:
        return str(uuid.UUID(str(identifier))) if identifier else None
    except ValueError:
        return None


def _error_of(message: str) -> ModelError:
    """pi's error text as a typed error (the text is logged, not passed on: it may quote the endpoint)."""
    logger.warning("pi model: the model call failed: %s", message[:500])
    lowered = message.lower()
    if "timeout" in lowered or "timed out" in lowered:
        return ModelTimeout(details={"adapter": PiModelAdapter.name})
    if any(mark in lowered for mark in ("connection error", "econnrefused", "fetch failed", "enotfound")):
        return ModelUnavailable(details={"adapter": PiModelAdapter.name})
    status = message.split(" ", 1)[0]
    if status.isdigit() and len(status) == 3:
        return ModelError(
            f"The model endpoint answered with status {status}.",
            details={"adapter": PiModelAdapter.name, "status": int(status)},
        )
    return ModelError(details={"adapter": PiModelAdapter.name})
