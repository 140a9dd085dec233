"""The kinds of session events and one typed body per kind (DESIGN.md, "Sessions and the live stream").

Every event leaves Tess as ``{"seq", "kind", "ts", "body"}``. Bodies carry ids and statuses, never
memory note text. Build bodies only with these functions, so every writer speaks the same schema.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, NotRequired, TypedDict


class EventKind(StrEnum):
    OUTPUT = "output"
    MESSAGE_IN = "message.in"
    TURN_IN = "turn.in"
    TURN_OUT = "turn.out"
    CARD = "card"
    APPROVAL = "approval"
    HANDOFF = "handoff"
    STATUS = "status"
    SYSTEM = "system"
    REDACTED = "redacted"


class OutputBody(TypedDict):
    data: str  # runtime output, as text
    source: str  # where in the runtime it came from (tmux: the pane id); opaque
    cursor: str  # provider cursor where this output starts
    next_cursor: str  # and where it ends: reading from it continues exactly here


class MessageInBody(TypedDict):
    inbox_id: int
    text: str
    channel: str


class TurnInBody(TypedDict):
    turn_id: str
    channel: str
    text: str


class TurnOutBody(TypedDict):
    turn_id: str
    text: str
    recalled_count: int
    # Memory ids only (never note text): the stream's other readers learn nothing they could open.
    recalled: list[str]
    # Present (true) only on a stopped turn: ``text`` is the reply as far as it was shown when it was stopped.
    stopped: NotRequired[bool]


class CardBody(TypedDict):
    id: str
    kind: str
    status: str
    outcome: str


class ApprovalBody(TypedDict):
    id: str
    status: str


class HandoffBody(TypedDict):
    id: str
    status: str
    result: str


class StatusBody(TypedDict):
    status: str  # the Tess session's: running, exited, terminated
    agent_state: str  # the agent's, as its runtime says (providers_app.contract.AgentState)
    since: str | None  # ISO 8601: since when the agent has been in that state (None: not known)


class SystemBody(TypedDict):
    text: str
    code: str


class RedactedBody(TypedDict):
    """Earlier events whose text was replaced in place (a forgotten note's words): re-render those seqs."""

    seqs: list[int]
    text: str  # what their ``text`` reads now


class TurnDeltaBody(TypedDict):
    """A websocket-only frame (never stored, no seq): a piece of the reply to ``turn_id`` as the model writes it."""

    turn_id: str
    offset: int  # characters of the reply before this piece: pieces join in offset order, each once
    text: str


def output_body(*, data: str, source: str, cursor: str, next_cursor: str) -> OutputBody:
    return {"data": data, "source": source, "cursor": cursor, "next_cursor": next_cursor}


def message_in_body(*, inbox_id: int, text: str, channel: str) -> MessageInBody:
    return {"inbox_id": inbox_id, "text": text, "channel": channel}


def turn_in_body(*, turn_id: str, channel: str, text: str) -> TurnInBody:
    return {"turn_id": turn_id, "channel": channel, "text": text}


def turn_out_body(
    *, turn_id: str, text: str, recalled_count: int, recalled: list[str] | None = None, stopped: bool = False
) -> TurnOutBody:
    body: TurnOutBody = {
        "turn_id": turn_id,
        "text": text,
        "recalled_count": recalled_count,
        "recalled": list(recalled or []),
    }
    if stopped:
        body["stopped"] = True
    return body


def card_body(*, id: str, kind: str, status: str, outcome: str = "") -> CardBody:
    return {"id": id, "kind": kind, "status": status, "outcome": outcome}


def approval_body(*, id: str, status: str) -> ApprovalBody:
    return {"id": id, "status": status}


def handoff_body(*, id: str, status: str, result: str = "") -> HandoffBody:
    return {"id": id, "status": status, "result": result}


def status_body(*, status: str, agent_state: str, since: datetime | None) -> StatusBody:
    stamp = since.isoformat().replace("+00:00", "Z") if since is not None else None
    return {"status": status, "agent_state": agent_state, "since": stamp}


def system_body(*, text: str, code: str = "") -> SystemBody:
    return {"text": text, "code": code}


def redacted_body(*, seqs: list[int], text: str) -> RedactedBody:
    return {"seqs": sorted(seqs), "text": text}


TURN_DELTA = "turn.delta"
# A frame (never stored, no seq) telling a bound client that a cutover or rollback moved its binding:
# ``{"from", "to", "migration", "cursor"}`` (``bindings.binding_moved``).
BINDING_MOVED = "binding.moved"


def turn_delta_body(*, turn_id: str, offset: int, text: str) -> TurnDeltaBody:
    return {"turn_id": turn_id, "offset": offset, "text": text}


def frame(*, seq: int | None, kind: str, ts: str, body: Any) -> dict[str, Any]:
    """The one wire shape of an event (REST and websocket alike).

    ``ts`` is ISO 8601 in UTC written with ``Z``, exactly as the REST serializers write it, so a client sees
    one format whichever way an event reached it.
    """
    if ts.endswith("+00:00"):
        ts = ts[:-6] + "Z"
    return {"seq": seq, "kind": kind, "ts": ts, "body": body}


SCHEMA_DESCRIPTION = """
Every session event is `{"seq", "kind", "ts", "body"}`: `seq` is per session, gap-free and strictly
increasing; read `GET /api/v1/sessions/{id}/events/?cursor=N` or the websocket
`/ws/sessions/{id}/stream/?cursor=N` to get every event after `N`. Bodies by kind:

| kind | body |
| --- | --- |
| `output` | `{"data": str, "source": str, "cursor": str, "next_cursor": str}` runtime output (`source`: \
where in the runtime, e.g. a pane; cursors are opaque provider cursors) |
| `message.in` | `{"inbox_id": int, "text": str, "channel": str}` raw input delivered to the runtime |
| `turn.in` | `{"turn_id": str, "channel": str, "text": str}` an operator's turn |
| `turn.out` | `{"turn_id": str, "text": str, "recalled_count": int, "recalled": [str], "stopped"?: true}` \
Tess's reply; `recalled`: the memory ids of the notes that grounded it; `stopped` (present only then): the \
turn was stopped and `text` is the reply as far as it had been shown |
| `card` | `{"id": str, "kind": str, "status": str, "outcome": str}` |
| `approval` | `{"id": str, "status": "pending" \\| "approved" \\| "denied" \\| "executed" \\| "failed"}` |
| `handoff` | `{"id": str, "status": str, "result": str}` |
| `status` | `{"status": "running" \\| "exited" \\| "terminated", "agent_state": str, "since": str \\| null}` \
the session's status and its agent's state, written once per change: `agent_state` is `working`, \
`waiting_for_input`, `idle`, `error`, `ended` or `unknown` (the runtime cannot tell), as the runtime says; \
`since` (ISO 8601) is when the agent entered it |
| `system` | `{"text": str, "code": str}` a system line |
| `redacted` | `{"seqs": [int], "text": str}` the earlier `turn.in` / `turn.out` events `seqs` carried the words \
of operator notes that were since forgotten or erased: their `text` now reads `text` \
("(forgotten memory request)"), seq and kind unchanged; re-render them |

Websocket-only frames (`seq` null, never stored, not replayed): `heartbeat` (body `{"last_seq": int}`) at \
least every 30 seconds; `turn.delta` (body `{"turn_id": str, "offset": int, "text": str}`) a piece of a reply \
while the model writes it, `offset` being the characters before it; the reply's `turn.out` follows with the \
whole text and supersedes the pieces. A socket that connects while a reply is being written first gets its \
text so far as one `turn.delta` from offset 0.
Bodies carry ids, never memory note text.
""".strip()
