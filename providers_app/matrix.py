"""The Matrix runtime provider: a bot account on a homeserver; the rooms it has joined are sessions.

The stream is other members' messages, each ending its line (``message_line``), read by sync token and
back-filled so no event is lost or repeated;
sends use transaction ids the homeserver de-duplicates. Options, the API used and what is not promised:
README, "Runtime providers".
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from tess_site.errors import InvalidInput
from tess_site.scope import Scope

from .contract import (
    AgentObservation,
    AgentRuntimeProvider,
    AgentState,
    ApprovalRequired,
    Attachment,
    AttachMode,
    Capabilities,
    Operation,
    OutputChunk,
    ProviderError,
    ProviderHealth,
    RuntimeNode,
    RuntimeNotFound,
    RuntimeRef,
    RuntimeSession,
    SendResult,
    StreamPage,
    message_line,
)
from .matrix_client import CLIENT_V3, MatrixClient, MatrixRefused, public_url, segment

logger = logging.getLogger(__name__)

# "!opaque:server" before room version 12; "!" and a hash of the create event from then on.
_ROOM_ID = re.compile(r"!\S{1,255}")
CURSOR_PREFIX = "mx1."
MAX_WINDOWS = 256
BACKFILL_PAGE = 100
THREAD_TITLE = 80


@dataclass(frozen=True)
class _Event:
    event_id: str
    body: bytes


@dataclass
class _Window:
    """The output events after sync token ``since`` known so far, and the token after the last of them."""

    events: list[_Event]
    tail: str
    seen: set[str] = field(default_factory=set)
    left: bool = False


def _encode(since: str, index: int, offset: int) -> str:
    raw = json.dumps([since, index, offset], separators=(",", ":")).encode()
    return CURSOR_PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str) -> tuple[str, int, int]:
    try:
        if not cursor.startswith(CURSOR_PREFIX):
            raise ValueError
        encoded = cursor[len(CURSOR_PREFIX) :]
        since, index, offset = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
        if not isinstance(since, str) or type(index) is not int or type(offset) is not int or min(index, offset) < 0:
            raise ValueError
    except (ValueError, TypeError, binascii.Error):
        raise InvalidInput("Malformed stream cursor.", details={"field": "cursor"}) from None
    return since, index, offset


def _char_end(data: bytes, start: int, budget: int) -> int:
    """The furthest UTF-8 character boundary within ``budget`` bytes of ``start`` (at least one character)."""
    end = min(len(data), start + budget)
    while start < end < len(data) and data[end] & 0xC0 == 0x80:
        end -= 1
    if end == start:  # the next character alone is longer than the budget: send it whole
        end = start + 1
        while end < len(data) and data[end] & 0xC0 == 0x80:
            end += 1
    return end


def _read_token(name: str, config: dict[str, Any]) -> str:
    where = f"TESS_RUNTIME_PROVIDERS[{name!r}]"
    if "access_token" in config:
        raise ImproperlyConfigured(f"{where} must not hold the token; use 'access_token_file' or 'access_token_env'.")
    token = ""
    if config.get("access_token_file"):
        try:
            token = Path(str(config["access_token_file"])).expanduser().read_text().strip()
        except OSError:
            raise ImproperlyConfigured(f"{where}['access_token_file'] cannot be read.") from None
    elif config.get("access_token_env"):
        token = os.environ.get(str(config["access_token_env"]), "").strip()
    if not token:
        raise ImproperlyConfigured(f"{where} needs a non-empty 'access_token_file' or 'access_token_env'.")
    return token


class MatrixProvider(AgentRuntimeProvider):
    """A named bot account. Thread-safe; one instance per name (``registry.get_provider``)."""

    kind = "matrix"

    def __init__(self, *, name: str, config: dict[str, Any]) -> None:
        super().__init__(name=name, config=config)
        homeserver = config.get("homeserver")
        if not isinstance(homeserver, str) or not homeserver.startswith(("http://", "https://")):
            raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{name!r}] needs an http(s) 'homeserver' URL.")
        self.homeserver = public_url(homeserver)
        self.stop_message = str(config.get("stop_message") or "This session was ended by the operator.")
        invite = config.get("invite") or []
        if not isinstance(invite, list) or not all(isinstance(user, str) and user for user in invite):
            raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{name!r}]['invite'] must be a list of user ids.")
        self.invite: list[str] = invite
        self.timeline_limit = int(config.get("timeline_limit", 50))
        self.refresh_seconds = float(config.get("refresh_seconds", 5.0))
        self.client = MatrixClient(
            homeserver=homeserver, access_token=_read_token(name, config), timeout=float(config.get("timeout", 10.0))
        )
        self._user_id = ""
        self._windows: OrderedDict[tuple[str, str], _Window] = OrderedDict()
        self._members: dict[str, tuple[float, str]] = {}  # room → (checked at, membership)
        self._sent: dict[tuple[str, str], str] = {}  # (room, txn id) → event id, for ``replayed``
        self._lock = threading.Lock()

    # --- what it offers ------------------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        operations = set(Operation) if self.invite else set(Operation) - {Operation.START}
        return Capabilities(
            kind=self.kind,
            instance=self.name,
            operations=frozenset(operations),
            attach_modes=frozenset({AttachMode.READ_ONLY}),  # a room has no raw terminal to type into
            cursor="a /sync token plus events and bytes read after it",
        )

    def health(self) -> ProviderHealth:
        """Heartbeat: ``/versions`` answers and ``/account/whoami`` accepts the token; the joined rooms."""
        base: dict[str, Any] = {"homeserver": self.homeserver}
        try:
            versions = self.client.get("/_matrix/client/versions", auth=False).get("versions") or []
            user_id = self._user_id = str(self.client.get(f"{CLIENT_V3}/account/whoami")["user_id"])
            rooms = self.client.get(f"{CLIENT_V3}/joined_rooms").get("joined_rooms") or []
        except ProviderError as exc:
            return ProviderHealth(ok=False, kind=self.kind, instance=self.name, detail={**base, "error": exc.code})
        except MatrixRefused as exc:
            detail = {**base, "error": "refused", "status": exc.status_code}
            return ProviderHealth(ok=False, kind=self.kind, instance=self.name, detail=detail)
        detail = {**base, "user_id": user_id, "versions": versions[-1:], "rooms": len(rooms)}
        return ProviderHealth(
            ok=True, kind=self.kind, instance=self.name, detail=detail, heartbeat_at=datetime.now(UTC)
        )

    def user_id(self) -> str:
        """The bot's user id (``whoami`` once, then remembered)."""
        if not self._user_id:
            self._user_id = str(self.client.get(f"{CLIENT_V3}/account/whoami")["user_id"])
        return self._user_id

    # --- reads ---------------------------------------------------------------------------------------

    def list_sessions(self, scope: Scope) -> list[RuntimeSession]:
        """Every room the bot has joined, oldest first."""
        sessions = [self._session(room) for room in self._joined_rooms()]
        return sorted(sessions, key=lambda s: (s.created_at or datetime.min.replace(tzinfo=UTC), s.ref.runtime_id))

    def get_session_tree(self, scope: Scope, ref: RuntimeRef | None = None) -> list[RuntimeNode]:
        """Room → its main timeline (the active child) and its threads (``/threads``, newest first)."""
        if ref is not None:
            self._require_joined(ref)
            rooms = [ref.runtime_id]
        else:
            rooms = [session.ref.runtime_id for session in self.list_sessions(scope)]
        return [self._tree(room) for room in rooms]

    def stream_session(self, ref: RuntimeRef, cursor: str | None, scope: Scope, *, limit: int = 65536) -> StreamPage:
        """Message text after ``cursor`` (see the module docstring), at most ``limit`` bytes per page.

        ``ended`` once the bot has left the room and everything before its leaving has been returned.
        """
        self._check_ref(ref)
        if limit < 1:
            raise InvalidInput("The page limit must be positive.", details={"field": "limit"})
        room = ref.runtime_id
        since, index, offset = _decode(cursor) if cursor is not None else ("", 0, 0)
        window, fresh = self._window(room, since)
        if index >= len(window.events) and not fresh:
            self._extend(room, window)
        events = window.events
        if (
            index > len(events)
            or (index == len(events) and offset)
            or (index < len(events) and offset >= len(events[index].body))
        ):
            raise InvalidInput("The stream cursor points past the stream.", details={"field": "cursor"})

        def at(i: int, off: int) -> str:
            return _encode(window.tail, 0, 0) if i >= len(events) else _encode(since, i, off)

        chunks: list[OutputChunk] = []
        budget = limit
        while index < len(events) and budget > 0:
            event = events[index]
            end = _char_end(event.body, offset, budget)
            if chunks and end - offset > budget:
                break
            start = at(index, offset)
            data = event.body[offset:end].decode()
            budget -= end - offset
            index, offset = (index + 1, 0) if end >= len(event.body) else (index, end)
            chunks.append(OutputChunk(data=data, cursor=start, next_cursor=at(index, offset), source=event.event_id))
        ended = False
        if index >= len(events):
            membership = "leave" if window.left else self._membership(room, fresh=False)
            if membership not in ("join", "leave", "ban"):
                raise RuntimeNotFound(details={"provider": self.name})  # never a member: not a session of ours
            ended = membership != "join"
        return StreamPage(chunks=tuple(chunks), next_cursor=at(index, offset), ended=ended)

    def agent_state(self, ref: RuntimeRef, scope: Scope) -> AgentObservation:
        """Who wrote the room's last message: Tess's account (an operator's message the agent has not
        answered yet) is working, anyone else (the agent answered) is idle. A room Tess left is ended."""
        self._check_ref(ref)
        room = ref.runtime_id
        if self._membership(room, fresh=False) != "join":
            return AgentObservation(AgentState.ENDED, "Tess's account left the room")
        params = {"dir": "b", "limit": 1, "filter": json.dumps({"types": ["m.room.message"]})}
        try:
            page = self.client.get(f"{CLIENT_V3}/rooms/{segment(room)}/messages", params)
        except MatrixRefused:
            raise RuntimeNotFound(details={"provider": self.name}) from None
        last = next((e for e in page.get("chunk") or [] if isinstance(e, dict)), None)
        if last is None:
            return AgentObservation(AgentState.IDLE, "no messages yet")
        if last.get("sender") == self.user_id():
            return AgentObservation(AgentState.WORKING, "the last message is Tess's")
        return AgentObservation(AgentState.IDLE, "the last message is the agent's")

    # --- actions -------------------------------------------------------------------------------------

    def send_message(self, ref: RuntimeRef, message: str, idempotency_key: str, scope: Scope) -> SendResult:
        """Post ``message`` as ``m.text``; the transaction id is derived from the room and the key.

        A retry with the same key is answered by the homeserver with the first event's id: nothing new is
        posted (even if the text differs: the key names the send).
        """
        self._check_ref(ref)
        if not idempotency_key:
            raise InvalidInput("An idempotency key is required.", details={"field": "idempotency_key"})
        event_id, replayed = self._post(ref.runtime_id, message, self.txn_id(ref.runtime_id, "send", idempotency_key))
        logger.info(
            "matrix %s: sent %d characters to %s (%s)", self.name, len(message), ref.runtime_id, scope.correlation_id
        )
        return SendResult(delivered=True, provider_message_id=event_id, replayed=replayed)

    def attach(self, ref: RuntimeRef, mode: AttachMode, scope: Scope) -> Attachment:
        """Read-only only: the bot must be in the room; the durable attachment is the caller's record."""
        mode = AttachMode(mode)
        if mode not in self.capabilities().attach_modes:
            raise self._unsupported(Operation.ATTACH)
        self._require_joined(ref)
        return Attachment(ref=ref, mode=mode)

    def detach(self, ref: RuntimeRef, scope: Scope) -> None:
        """Nothing to undo on the homeserver; succeeds for a room since left (detaching is always safe)."""
        self._check_ref(ref)

    def terminate(self, ref: RuntimeRef, approval_ref: str, scope: Scope) -> None:
        """Post the stop message, then leave the room. The caller has verified ``approval_ref``."""
        if not approval_ref or not approval_ref.strip():
            raise ApprovalRequired(details={"provider": self.name, "operation": Operation.TERMINATE.value})
        room = self._require_joined(ref)
        self._post(room, self.stop_message, self.txn_id(room, "terminate", approval_ref))
        try:
            self.client.post(f"{CLIENT_V3}/rooms/{segment(room)}/leave", {})
        except MatrixRefused:
            raise RuntimeNotFound(details={"provider": self.name}) from None
        with self._lock:
            self._members[room] = (time.monotonic(), "leave")
        logger.info("matrix %s: left %s (%s)", self.name, room, scope.correlation_id)

    def start_session(self, scope: Scope, *, title: str) -> RuntimeSession:
        """A new private room named ``title``, inviting the configured users (never a client's choice)."""
        if not self.invite:
            raise self._unsupported(Operation.START)
        body = {"name": title[:255], "preset": "private_chat", "invite": self.invite}
        try:
            room = str(self.client.post(f"{CLIENT_V3}/createRoom", body)["room_id"])
        except MatrixRefused as exc:
            raise ProviderError(
                "The homeserver refused to create the room.", details={"status": exc.status_code}
            ) from None
        logger.info("matrix %s: created %s (%s)", self.name, room, scope.correlation_id)
        return self._session(room)

    @staticmethod
    def txn_id(room: str, action: str, key: str) -> str:
        """Deterministic per room, action and key, so a retry reuses the transaction id."""
        return "tess-" + hashlib.sha256(f"{room}\0{action}\0{key}".encode()).hexdigest()[:40]

    def _post(self, room: str, text: str, txn: str) -> tuple[str, bool]:
        """The event id the homeserver gives ``txn``, and whether this process already had that answer."""
        path = f"{CLIENT_V3}/rooms/{segment(room)}/send/m.room.message/{segment(txn)}"
        try:
            event_id = str(self.client.put(path, {"msgtype": "m.text", "body": text})["event_id"])
        except MatrixRefused:
            raise RuntimeNotFound(details={"provider": self.name}) from None
        with self._lock:
            replayed = self._sent.get((room, txn)) == event_id
            self._sent[(room, txn)] = event_id
        return event_id, replayed

    # --- identity and membership ---------------------------------------------------------------------

    def _ref(self, room: str) -> RuntimeRef:
        return RuntimeRef(
            instance=self.name, runtime_id=room, identity={"homeserver": self.homeserver, "user_id": self.user_id()}
        )

    def _check_ref(self, ref: RuntimeRef) -> None:
        """Without asking the homeserver: the reference belongs to this instance and is well formed."""
        identity = ref.identity or {}
        if (
            ref.instance != self.name
            or not _ROOM_ID.fullmatch(ref.runtime_id)
            or identity.get("homeserver") != self.homeserver
            or identity.get("user_id") != self.user_id()
        ):
            raise RuntimeNotFound(details={"provider": self.name})

    def _membership(self, room: str, *, fresh: bool) -> str:
        """The bot's membership of ``room`` ("join", "leave", "ban", …, or "" when it never was in it).

        Asked at most once per ``refresh_seconds`` unless ``fresh``; a left room is never asked again.
        """
        with self._lock:
            known = self._members.get(room)
        if known and (known[1] != "join" or (not fresh and time.monotonic() - known[0] < self.refresh_seconds)):
            return known[1]
        path = f"{CLIENT_V3}/rooms/{segment(room)}/state/m.room.member/{segment(self.user_id())}"
        try:
            membership = str(self.client.get(path).get("membership", ""))
        except MatrixRefused:
            membership = ""
        with self._lock:
            self._members[room] = (time.monotonic(), membership)
        return membership

    def _require_joined(self, ref: RuntimeRef) -> str:
        self._check_ref(ref)
        if self._membership(ref.runtime_id, fresh=True) != "join":
            raise RuntimeNotFound(details={"provider": self.name})
        return ref.runtime_id

    def _joined_rooms(self) -> list[str]:
        return [str(room) for room in self.client.get(f"{CLIENT_V3}/joined_rooms").get("joined_rooms") or []]

    def _session(self, room: str) -> RuntimeSession:
        try:
            events = self._state(room)
        except MatrixRefused:
            raise RuntimeNotFound(details={"provider": self.name}) from None
        name = next((e["content"].get("name") for e in events if e.get("type") == "m.room.name"), None)
        created = next((e.get("origin_server_ts") for e in events if e.get("type") == "m.room.create"), None)
        return RuntimeSession(
            ref=self._ref(room),
            title=str(name or room),
            status="running",
            created_at=datetime.fromtimestamp(created / 1000, tz=UTC) if isinstance(created, int) else None,
        )

    def _state(self, room: str) -> list[dict[str, Any]]:
        body = self.client.get_list(f"{CLIENT_V3}/rooms/{segment(room)}/state")
        return [event for event in body if isinstance(event, dict) and isinstance(event.get("content"), dict)]

    def _tree(self, room: str) -> RuntimeNode:
        session = self._session(room)
        try:
            roots = (
                self.client.get(f"/_matrix/client/v1/rooms/{segment(room)}/threads", {"limit": 50}).get("chunk") or []
            )
        except MatrixRefused:
            roots = []
        threads = tuple(
            RuntimeNode(
                id=str(root["event_id"]),
                kind="thread",
                title=str((root.get("content") or {}).get("body", ""))[:THREAD_TITLE],
            )
            for root in roots
            if isinstance(root, dict) and "event_id" in root
        )
        main = RuntimeNode(id="main", kind="timeline", title="Main timeline", active=True)
        return RuntimeNode(id=room, kind="room", title=session.title, active=True, children=(main, *threads))

    # --- the stream ----------------------------------------------------------------------------------

    def _output_filter(self) -> dict[str, Any]:
        """Messages from anyone but the bot (a RoomEventFilter, for ``/sync`` and ``/messages`` alike)."""
        return {"types": ["m.room.message"], "not_senders": [self.user_id()]}

    def _window(self, room: str, since: str) -> tuple[_Window, bool]:
        """The cached events after ``since``, or a new window filled now (then ``True``: it is fresh)."""
        key = (room, since)
        with self._lock:
            window = self._windows.get(key)
            if window is not None:
                self._windows.move_to_end(key)
                return window, False
        window = _Window(events=[], tail=since)
        self._extend(room, window)
        with self._lock:
            self._windows[key] = window
            while len(self._windows) > MAX_WINDOWS:
                self._windows.popitem(last=False)
        return window, True

    def _extend(self, room: str, window: _Window) -> None:
        """Append the output events after ``window.tail``: one ``/sync``, back-filled when ``limited``."""
        token = window.tail
        sync_filter = {
            "presence": {"types": []},
            "account_data": {"types": []},
            "room": {
                "rooms": [room],
                "include_leave": True,
                "timeline": {"limit": self.timeline_limit, **self._output_filter()},
                "state": {"types": []},
                "ephemeral": {"types": []},
                "account_data": {"types": []},
            },
        }
        params: dict[str, Any] = {"filter": json.dumps(sync_filter), "timeout": 0, "set_presence": "offline"}
        if token:
            params["since"] = token
        body = self.client.get(f"{CLIENT_V3}/sync", params)
        rooms = body.get("rooms") or {}
        joined, left = (rooms.get("join") or {}).get(room), (rooms.get("leave") or {}).get(room)
        entry = joined or left or {}
        timeline = entry.get("timeline") or {}
        events = [e for e in timeline.get("events") or [] if isinstance(e, dict)]
        if timeline.get("limited") and timeline.get("prev_batch"):
            events = self._backfill(room, str(timeline["prev_batch"]), token) + events
        with self._lock:
            for event in events:
                event_id = str(event.get("event_id", ""))
                body_text = (event.get("content") or {}).get("body")
                if not event_id or event_id in window.seen:
                    continue
                window.seen.add(event_id)
                if isinstance(body_text, str) and body_text:
                    window.events.append(_Event(event_id=event_id, body=message_line(body_text).encode()))
            window.tail = str(body.get("next_batch") or token)
            if left is not None:
                window.left = True
                self._members[room] = (time.monotonic(), "leave")

    def _backfill(self, room: str, start: str, stop: str) -> list[dict[str, Any]]:
        """The events from ``start`` back to ``stop`` (or the room's beginning), oldest first."""
        found: list[dict[str, Any]] = []
        token = start
        while True:
            params: dict[str, Any] = {
                "dir": "b",
                "from": token,
                "limit": BACKFILL_PAGE,
                "filter": json.dumps(self._output_filter()),
            }
            if stop:
                params["to"] = stop
            try:
                page = self.client.get(f"{CLIENT_V3}/rooms/{segment(room)}/messages", params)
            except MatrixRefused:
                raise RuntimeNotFound(details={"provider": self.name}) from None
            chunk = [e for e in page.get("chunk") or [] if isinstance(e, dict)]
            found.extend(chunk)
            end = page.get("end")
            if not chunk or not end or end == token:
                break
            token = str(end)
        found.reverse()
        return found
