"""The AgentRuntimeProvider contract: what every runtime (tmux, pi, Hermes, Matrix) offers Tess.

It is separate from model completion (``providers_app.model_adapters``): a runtime is where an
agent's session lives; Tess lists, streams, sends to, attaches to and — after approval — terminates it.
Every call takes the server-derived Scope (which carries the correlation id). Results are normalized
dataclasses; nothing provider-specific leaks past this module. An operation a provider does not offer
raises ``CapabilityUnsupported``: nothing is emulated silently (seed 001, "fail closed").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from rest_framework import status

from tess_site.errors import TessError
from tess_site.scope import Scope

# --- typed errors --------------------------------------------------------------------------------


class ProviderError(TessError):
    code = "provider_error"
    status_code: int = status.HTTP_502_BAD_GATEWAY
    default_message = "The runtime provider failed."


class CapabilityUnsupported(ProviderError):
    code = "capability_unsupported"
    status_code = status.HTTP_501_NOT_IMPLEMENTED
    default_message = "This runtime provider does not support that operation."


class RuntimeNotFound(ProviderError):
    code = "runtime_not_found"
    status_code = status.HTTP_404_NOT_FOUND
    default_message = "No such runtime session."


class ApprovalRequired(ProviderError):
    code = "approval_required"
    status_code = status.HTTP_403_FORBIDDEN
    default_message = "This action needs an approved, unused approval for exactly this session and action."


class ProviderUnavailable(ProviderError):
    """Transient: the runtime could not be reached. Tasks retry these with backoff."""

    code = "provider_unavailable"
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_message = "The runtime provider is unavailable; try again shortly."


class ProviderConflict(ProviderError):
    code = "provider_conflict"
    status_code = status.HTTP_409_CONFLICT
    default_message = "The runtime is not in a state that allows this."


class CursorLost(ProviderError):
    """The stream cursor no longer names a point of the runtime's stream (the runtime rewrote what it was
    read from, e.g. pi migrating a session file): reading on from it would repeat or skip output."""

    code = "stream_cursor_lost"
    status_code = status.HTTP_409_CONFLICT
    default_message = "The runtime rewrote its stream under the cursor; resume from the session's checkpoint."


class AttachmentRequired(ProviderError):
    code = "interactive_attachment_required"
    status_code = status.HTTP_409_CONFLICT
    default_message = "Raw input needs an interactive attachment; attach with mode 'interactive' first."


# --- vocabulary ------------------------------------------------------------------------------------


class Operation(StrEnum):
    LIST = "list_sessions"
    TREE = "get_session_tree"
    STREAM = "stream_session"
    SEND = "send_message"
    ATTACH = "attach"
    DETACH = "detach"
    TERMINATE = "terminate"
    START = "start_session"


class AttachMode(StrEnum):
    READ_ONLY = "read_only"
    INTERACTIVE = "interactive"


class AgentState(StrEnum):
    """What the agent in a runtime session is doing, as its runtime says (never a model's guess)."""

    WORKING = "working"
    WAITING_FOR_INPUT = "waiting_for_input"
    IDLE = "idle"
    ERROR = "error"
    ENDED = "ended"
    UNKNOWN = "unknown"  # the provider cannot tell


# States that are facts once seen (an exit status, a session gone): announced without a debounce.
FINAL_AGENT_STATES = frozenset({AgentState.ERROR, AgentState.ENDED})


@dataclass(frozen=True)
class AgentObservation:
    """One look at a runtime session: its agent's state now, and what the runtime said (for logs, not UI).

    ``since``: when the runtime says the state began, if it knows (tmux: the pane's last output, for a
    state that is the absence of output); it becomes the announced ``since``.
    """

    state: AgentState
    reason: str = ""
    since: datetime | None = None


@dataclass(frozen=True)
class RuntimeRef:
    """Where a runtime session lives: a configured provider instance and the provider's exact id.

    ``runtime_id`` is exact (tmux ``$3``, a pi session file id, a Matrix room id), never a name prefix.
    ``identity`` pins what the id meant when it was bound (for tmux: socket, server pid, session creation
    time), so a recycled id on a restarted server is not mistaken for the old session.
    """

    instance: str
    runtime_id: str
    identity: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Capabilities:
    kind: str
    instance: str
    operations: frozenset[Operation]
    attach_modes: frozenset[AttachMode] = frozenset({AttachMode.READ_ONLY})
    cursor: str = "opaque"  # how the stream cursor is defined, e.g. "byte offset of the pane log"
    # Whether the stream marks the points the runtime compacted its context at (``OutputChunk.checkpoint``);
    # a runtime that never compacts says False, and its stream never carries one.
    checkpoints: bool = False

    def supports(self, operation: Operation) -> bool:
        return operation in self.operations


@dataclass(frozen=True)
class ProviderHealth:
    ok: bool
    kind: str
    instance: str
    detail: dict[str, Any] = field(default_factory=dict)  # never credentials
    heartbeat_at: datetime | None = None


@dataclass(frozen=True)
class RuntimeSession:
    ref: RuntimeRef
    title: str
    status: str  # "running", "exited", "unknown"
    created_at: datetime | None = None
    last_activity_at: datetime | None = None


@dataclass(frozen=True)
class RuntimeNode:
    """One node of a session tree (tmux: session → windows → panes; pi: entries by parentId)."""

    id: str
    kind: str
    title: str
    children: tuple[RuntimeNode, ...] = ()
    active: bool = False


@dataclass(frozen=True)
class OutputChunk:
    """Output between two cursors. Reading from ``next_cursor`` continues exactly where this ended."""

    data: str
    cursor: str
    next_cursor: str
    source: str = ""  # the provider's exact id of where it came from (tmux: the pane, "%5"); opaque
    # A point the runtime compacted its context at (pi: a ``compaction`` entry), for sessions_app to record
    # as a checkpoint event: ``{"kind", "entry_id", "summary", "first_kept_entry_id", "tokens_before"}``.
    # Such a chunk usually carries no ``data``.
    checkpoint: dict[str, Any] | None = None
    # A billable step the runtime recorded (pi: an assistant message's ``usage``), for sessions_app's usage
    # ledger: ``{"ref", "model", "input", "output", "cache_read", "cache_write", "cost", "currency", "at"}``;
    # ``ref`` is the runtime's own id for the step, so a re-read records it once; ``cost`` None when not
    # reported; ``at`` when the runtime recorded it (ISO 8601).
    usage: dict[str, Any] | None = None


def message_line(text: str) -> str:
    """How a runtime of messages (pi, Hermes, Matrix) shows one message in its stream: its text, ending its
    line, so that the next message starts on a new line instead of running on after it."""
    return text if not text or text.endswith("\n") else text + "\n"


@dataclass(frozen=True)
class StreamPage:
    chunks: tuple[OutputChunk, ...]
    next_cursor: str
    ended: bool = False  # the runtime is gone and nothing more will come


@dataclass(frozen=True)
class SendResult:
    delivered: bool
    provider_message_id: str = ""
    replayed: bool = False  # the provider saw this idempotency key before and did nothing new


@dataclass(frozen=True)
class Attachment:
    ref: RuntimeRef
    mode: AttachMode


# --- the contract ----------------------------------------------------------------------------------


class AgentRuntimeProvider(ABC):
    """Base of every runtime provider. Subclasses implement what they support and nothing else.

    Unimplemented operations raise ``CapabilityUnsupported`` by default, so a provider fails closed
    unless it deliberately offers an operation.
    """

    kind: str = ""
    # Whether its stream reports billable steps (``OutputChunk.usage``): without, a session's usage is
    # unknown, never zero.
    reports_usage: bool = False

    def __init__(self, *, name: str, config: dict[str, Any]) -> None:
        self.name = name
        self.config = config

    def _unsupported(self, operation: Operation) -> CapabilityUnsupported:
        return CapabilityUnsupported(
            f"The {self.kind} provider {self.name!r} does not support {operation.value}.",
            details={"provider": self.name, "kind": self.kind, "operation": operation.value},
        )

    @abstractmethod
    def capabilities(self) -> Capabilities: ...

    @abstractmethod
    def health(self) -> ProviderHealth: ...

    def list_sessions(self, scope: Scope) -> list[RuntimeSession]:
        raise self._unsupported(Operation.LIST)

    def get_session_tree(self, scope: Scope, ref: RuntimeRef | None = None) -> list[RuntimeNode]:
        raise self._unsupported(Operation.TREE)

    def stream_session(self, ref: RuntimeRef, cursor: str | None, scope: Scope, *, limit: int = 65536) -> StreamPage:
        raise self._unsupported(Operation.STREAM)

    def send_message(self, ref: RuntimeRef, message: str, idempotency_key: str, scope: Scope) -> SendResult:
        raise self._unsupported(Operation.SEND)

    def attach(self, ref: RuntimeRef, mode: AttachMode, scope: Scope) -> Attachment:
        raise self._unsupported(Operation.ATTACH)

    def detach(self, ref: RuntimeRef, scope: Scope) -> None:
        raise self._unsupported(Operation.DETACH)

    def terminate(self, ref: RuntimeRef, approval_ref: str, scope: Scope) -> None:
        """Callers verify the approval first (sessions_app); providers still refuse an empty reference."""
        raise self._unsupported(Operation.TERMINATE)

    def start_session(self, scope: Scope, *, title: str) -> RuntimeSession:
        """Start a new runtime session with the instance's configured command (never a client's)."""
        raise self._unsupported(Operation.START)

    def resume_cursor(self, ref: RuntimeRef, cursor: str, checkpoint: dict[str, Any], scope: Scope) -> str:
        """After ``CursorLost``: the cursor of the same point of the stream as ``cursor`` (the one that was
        lost), found from ``checkpoint`` (a checkpoint of this stream as Tess recorded it, with its
        ``entry_id`` and ``cursor``) by what the runtime's entries are, not where they were. Reading on from
        it repeats nothing and skips nothing. Only providers that declare ``Capabilities.checkpoints``
        offer it; ``CursorLost`` again when neither point can be found any more."""
        raise CapabilityUnsupported(
            f"The {self.kind} provider {self.name!r} keeps no checkpoints to resume from.",
            details={"provider": self.name, "kind": self.kind, "operation": "resume_cursor"},
        )

    @property
    def agent_state_debounce(self) -> float:
        """Seconds a new agent state must hold before it is announced (instance option ``debounce_seconds``)."""
        try:
            return max(float(self.config.get("debounce_seconds", self.default_debounce)), 0.0)
        except (TypeError, ValueError):
            return self.default_debounce

    default_debounce: float = 0.0

    def agent_state(self, ref: RuntimeRef, scope: Scope) -> AgentObservation:
        """The agent's state from what the runtime says. ``unknown`` when this provider cannot tell;
        ``ProviderUnavailable`` when the runtime could not be asked this time."""
        return AgentObservation(AgentState.UNKNOWN, "not derived by this provider")

    def require(self, operation: Operation) -> None:
        if not self.capabilities().supports(operation):
            raise self._unsupported(operation)


# --- terminals: providers whose sessions are terminals ---------------------------------------------------


@dataclass(frozen=True)
class Screen:
    """What a terminal shows now, and where in the stream that is.

    ``data`` redraws it on a terminal of ``cols`` by ``rows``: the screen (normal or alternate) chosen,
    cleared, every row with its colours and attributes, the cursor put back (and hidden if it is).
    ``source`` is the stream's source it belongs to (a tmux pane) and ``cursor`` the stream cursor of that
    source up to which its output is already on this screen: output after it is drawn on top.
    """

    source: str
    cursor: str
    cols: int
    rows: int
    cursor_x: int
    cursor_y: int
    alternate: bool
    data: str


class TerminalProvider(ABC):
    """A provider whose sessions are terminals: it can say what the screen shows and type keys as they are.

    A separate contract, not operations of every provider: a chat-like runtime (pi, Hermes, Matrix) has no
    screen, and its sessions are shown as their text.
    """

    @abstractmethod
    def screen_snapshot(self, ref: RuntimeRef, scope: Scope) -> Screen: ...

    @abstractmethod
    def send_keys(self, ref: RuntimeRef, keys: str, idempotency_key: str, scope: Scope) -> SendResult:
        """Type ``keys`` exactly as given (no Enter added), once per ``idempotency_key``."""
