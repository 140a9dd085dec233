"""The Hermes runtime provider: sessions of a Hermes Agent API server, normalized.

The stream is the session's stored messages (so a broken event stream loses nothing), sends are runs with an
``Idempotency-Key``, and capabilities follow the server's own. Options and the routes used: README,
"Runtime providers".
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from django.core.cache import cache

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
    ProviderUnavailable,
    RuntimeNode,
    RuntimeNotFound,
    RuntimeRef,
    RuntimeSession,
    SendResult,
    StreamPage,
    message_line,
)
from .hermes_http import CredentialMissing, CredentialRefused, HermesHttp, public_endpoint
from .pi_files import parse_cursor, utf8_prefix

logger = logging.getLogger(__name__)

BASE_OPERATIONS = frozenset(
    {Operation.LIST, Operation.TREE, Operation.STREAM, Operation.ATTACH, Operation.DETACH, Operation.START}
)
TERMINAL_EVENTS = frozenset({"run.completed", "run.failed", "run.cancelled"})
# A run's status (``GET /v1/runs/{id}``) as the agent's state; any other status reads as unknown.
RUN_STATES = {
    "queued": AgentState.WORKING,
    "started": AgentState.WORKING,
    "running": AgentState.WORKING,
    "waiting_for_approval": AgentState.WAITING_FOR_INPUT,
    "requires_action": AgentState.WAITING_FOR_INPUT,
    "completed": AgentState.IDLE,
    "cancelled": AgentState.IDLE,
    "failed": AgentState.ERROR,
}
RUN_MEMORY_SECONDS = 7 * 24 * 3600
PAGE = 200
MAX_PAGES = 50


@dataclass(frozen=True)
class RunEvent:
    """One normalized event of a run: ``kind`` is Hermes's event name; ``text`` an answer delta."""

    kind: str
    run_id: str
    text: str = ""
    status: str = ""


def _time(value: Any) -> datetime | None:
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, tz=UTC)
    if isinstance(value, str) and value:
        try:
            stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text")
        )
    return ""


def _items(body: Any, key: str) -> list[dict[str, Any]]:
    items = body.get(key) if isinstance(body, dict) else body
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


class HermesProvider(AgentRuntimeProvider):
    """A named Hermes API server. Thread-safe; one instance per name (``registry.get_provider``)."""

    kind = "hermes"

    def __init__(self, *, name: str, config: dict[str, Any]) -> None:
        super().__init__(name=name, config=config)
        self.http = HermesHttp(name=name, config=config)
        self.endpoint = public_endpoint(self.http.base_url)
        self.capabilities_seconds = float(config.get("capabilities_seconds", 30.0))
        self._features: tuple[float, dict[str, Any]] | None = None
        self._runs: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"HermesProvider(name={self.name!r}, endpoint={self.endpoint!r})"

    # --- what it offers ------------------------------------------------------------------------------

    def _server_features(self) -> dict[str, Any]:
        with self._lock:
            cached = self._features
        if cached is not None and time.monotonic() - cached[0] < self.capabilities_seconds:
            return cached[1]
        body = self.http.json("GET", "/v1/capabilities")
        features = body.get("features") if isinstance(body, dict) else None
        features = features if isinstance(features, dict) else {}
        with self._lock:
            self._features = (time.monotonic(), features)
        return features

    def capabilities(self) -> Capabilities:
        features = self._server_features()
        operations = set(BASE_OPERATIONS)
        modes = {AttachMode.READ_ONLY}
        if features.get("run_submission") is True:
            operations.add(Operation.SEND)
            modes.add(AttachMode.INTERACTIVE)
        if features.get("run_stop") is True:
            operations.add(Operation.TERMINATE)
        return Capabilities(
            kind=self.kind,
            instance=self.name,
            operations=frozenset(operations),
            attach_modes=frozenset(modes),
            cursor="'<message index>.<bytes of its text returned>' in the session's stored messages",
        )

    def health(self) -> ProviderHealth:
        """Heartbeat: ``/health`` answers, and ``/v1/capabilities`` accepts the credential. No secret here."""
        detail: dict[str, Any] = {"endpoint": self.endpoint}
        try:
            body = self.http.json("GET", "/health", auth=False)
            detail["reachable"] = isinstance(body, dict) and body.get("status") == "ok"
        except ProviderError as exc:
            return ProviderHealth(
                ok=False, kind=self.kind, instance=self.name, detail={**detail, "reachable": False, "error": exc.code}
            )
        try:
            with self._lock:
                self._features = None
            features = self._server_features()
            detail |= {
                "auth": "ok",
                "run_submission": features.get("run_submission") is True,
                "run_stop": features.get("run_stop") is True,
            }
        except CredentialMissing:
            detail["auth"] = "missing"
        except CredentialRefused:
            detail["auth"] = "refused"
        except ProviderError as exc:
            detail["error"] = exc.code
        ok = bool(detail["reachable"]) and detail.get("auth") == "ok"
        return ProviderHealth(ok=ok, kind=self.kind, instance=self.name, detail=detail, heartbeat_at=datetime.now(UTC))

    # --- reads ---------------------------------------------------------------------------------------

    def _all_sessions(self, *, children: bool) -> list[dict[str, Any]]:
        sessions: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": PAGE, "include_children": "true" if children else "false"}
        for page in range(MAX_PAGES):
            batch = _items(self.http.json("GET", "/api/sessions", params={**params, "offset": page * PAGE}), "sessions")
            sessions += [item for item in batch if isinstance(item.get("id"), str)]
            if len(batch) < PAGE:
                break
        return sessions

    def list_sessions(self, scope: Scope) -> list[RuntimeSession]:
        """Open top-level sessions (an ended session is gone; children appear in the tree)."""
        return [
            self._session(item)
            for item in self._all_sessions(children=False)
            if not item.get("ended_at") and not item.get("parent_session_id")
        ]

    def get_session_tree(self, scope: Scope, ref: RuntimeRef | None = None) -> list[RuntimeNode]:
        """Sessions with their child sessions (forks, delegated subagents) by ``parent_session_id``;
        a child is active while it has not ended."""
        if ref is not None:
            self._open_session(ref, allow_ended=True)
        sessions = self._all_sessions(children=True)
        by_parent: dict[str | None, list[dict[str, Any]]] = {}
        ids = {item["id"] for item in sessions}
        for item in sessions:
            parent = item.get("parent_session_id")
            by_parent.setdefault(parent if parent in ids else None, []).append(item)

        def node(item: dict[str, Any], depth: int) -> RuntimeNode:
            kids = by_parent.get(item["id"], []) if depth < 32 else []
            return RuntimeNode(
                id=item["id"],
                kind="session",
                title=str(item.get("title") or item["id"]),
                active=not item.get("ended_at"),
                children=tuple(node(kid, depth + 1) for kid in kids),
            )

        if ref is not None:
            return [node(item, 0) for item in sessions if item["id"] == ref.runtime_id]
        return [node(item, 0) for item in by_parent.get(None, []) if not item.get("ended_at")]

    def stream_session(self, ref: RuntimeRef, cursor: str | None, scope: Scope, *, limit: int = 65536) -> StreamPage:
        """Stored user and assistant text after ``cursor``, each message ending its line (``message_line``;
        ``source`` = the message id); ``ended`` once the
        session has ended and everything it stored was returned."""
        index, within = parse_cursor(cursor)
        session = self._open_session(ref, allow_ended=True)
        messages = _items(self.http.json("GET", f"/api/sessions/{quote(ref.runtime_id, safe='')}/messages"), "messages")
        if index > len(messages):
            raise InvalidInput("The stream cursor is past the session's messages.", details={"cursor": "unknown"})
        chunks: list[OutputChunk] = []
        budget = max(limit, 1)
        while index < len(messages) and budget > 0:
            message = messages[index]
            role = message.get("role")
            text = message_line(_text(message.get("content"))).encode() if role in ("user", "assistant") else b""
            if within > len(text):
                raise InvalidInput("The stream cursor is past the message's text.", details={"cursor": "unknown"})
            rest = text[within:]
            taken = utf8_prefix(rest, budget) if rest else 0
            done = within + taken >= len(text)
            after = (index + 1, 0) if done else (index, within + taken)
            if taken:
                chunks.append(
                    OutputChunk(
                        data=rest[:taken].decode(errors="replace"),
                        cursor=f"{index}.{within}",
                        next_cursor=f"{after[0]}.{after[1]}",
                        source=str(message.get("id", "")),
                    )
                )
                budget -= taken
            index, within = after
        drained = index >= len(messages)
        return StreamPage(
            chunks=tuple(chunks), next_cursor=f"{index}.{within}", ended=drained and bool(session.get("ended_at"))
        )

    def run_events(self, ref: RuntimeRef, run_id: str, scope: Scope) -> Iterator[RunEvent]:
        """A run's live events until its terminal one; ``ProviderUnavailable`` if the stream breaks off."""
        self._open_session(ref, allow_ended=True)
        run = self.http.json("GET", f"/v1/runs/{quote(run_id, safe='')}")
        if not isinstance(run, dict) or run.get("session_id") != ref.runtime_id:
            raise RuntimeNotFound(details={"provider": self.name})
        for event in self.http.events(f"/v1/runs/{quote(run_id, safe='')}/events"):
            data = event.data if isinstance(event.data, dict) else {}
            delta = data.get("delta")
            yield RunEvent(
                kind=event.event,
                run_id=run_id,
                text=delta if isinstance(delta, str) and event.event == "message.delta" else "",
                status=str(data.get("status", "")),
            )
            if event.event in TERMINAL_EVENTS:
                return
        raise ProviderUnavailable("The run's event stream ended before the run did.", details={"provider": self.name})

    def agent_state(self, ref: RuntimeRef, scope: Scope) -> AgentObservation:
        """The status of the session's latest run Tess started (``GET /v1/runs/{id}``); without one, the
        stored messages: nothing asked or the assistant answered last is idle, a question with no run
        Tess knows of is unknown. An ended session is ended."""
        session = self._open_session(ref, allow_ended=True)
        if session.get("ended_at"):
            return AgentObservation(AgentState.ENDED, "the session has ended")
        run_id = cache.get(self._run_key(ref.runtime_id))
        if isinstance(run_id, str) and run_id:
            try:
                run = self.http.json("GET", f"/v1/runs/{quote(run_id, safe='')}")
            except RuntimeNotFound:
                run = None  # finished and forgotten by the server: the messages say the rest
            status = str(run.get("status", "")) if isinstance(run, dict) else ""
            if status in RUN_STATES:
                return AgentObservation(RUN_STATES[status], f"run {status}")
        messages = _items(self.http.json("GET", f"/api/sessions/{quote(ref.runtime_id, safe='')}/messages"), "messages")
        spoken = [m for m in messages if m.get("role") in ("user", "assistant")]
        if not spoken or spoken[-1].get("role") == "assistant":
            return AgentObservation(AgentState.IDLE, "the assistant answered last")
        return AgentObservation(AgentState.UNKNOWN, "a question and no run Tess knows of")

    def _run_key(self, session_id: str) -> str:
        digest = hashlib.sha256(f"{self.name}\0{self.endpoint}\0{session_id}".encode()).hexdigest()[:32]
        return f"hermes-run:{digest}"

    # --- actions -------------------------------------------------------------------------------------

    def start_session(self, scope: Scope, *, title: str) -> RuntimeSession:
        body = self.http.json("POST", "/api/sessions", json_body={"title": title[:200]})
        item = body.get("session", body) if isinstance(body, dict) else None
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise ProviderError("Hermes did not say which session it created.")
        logger.info("hermes %s: created session %s (%s)", self.name, item["id"], scope.correlation_id)
        return self._session(item)

    def send_message(self, ref: RuntimeRef, message: str, idempotency_key: str, scope: Scope) -> SendResult:
        """A run in the session with ``message`` as its input. The ``Idempotency-Key`` is derived from the
        instance and the caller's key, so a retry is recognised by Hermes (``replayed``); the same key with
        another message is a ``ProviderConflict``."""
        self.require(Operation.SEND)
        if not idempotency_key:
            raise InvalidInput("An idempotency key is required.", details={"idempotency_key": "required"})
        self._open_session(ref, allow_ended=False)
        key = "tess-" + hashlib.sha256(f"{self.name}\0{idempotency_key}".encode()).hexdigest()
        response = self.http.request(
            "POST",
            "/v1/runs",
            json_body={"input": message, "session_id": ref.runtime_id},
            headers={"Idempotency-Key": key},
        )
        body = response.json() if response.content else {}
        run_id = body.get("run_id") if isinstance(body, dict) else None
        if not isinstance(run_id, str) or not run_id:
            raise ProviderError("Hermes did not say which run it started.")
        replayed = response.headers.get("Idempotency-Replayed", "").lower() == "true"
        with self._lock:
            self._runs.setdefault(ref.runtime_id, set()).add(run_id)
        # Shared (the cache is Redis's when Tess runs with Redis): the pump asks about it from any process.
        cache.set(self._run_key(ref.runtime_id), run_id, timeout=RUN_MEMORY_SECONDS)
        logger.info(
            "hermes %s: run %s in %s (replayed=%s, %s)",
            self.name,
            run_id,
            ref.runtime_id,
            replayed,
            scope.correlation_id,
        )
        return SendResult(delivered=True, provider_message_id=run_id, replayed=replayed)

    def attach(self, ref: RuntimeRef, mode: AttachMode, scope: Scope) -> Attachment:
        mode = AttachMode(mode)
        if mode not in self.capabilities().attach_modes:
            raise self._unsupported(Operation.ATTACH)
        self._open_session(ref, allow_ended=False)
        return Attachment(ref=ref, mode=mode)

    def detach(self, ref: RuntimeRef, scope: Scope) -> None:
        """Nothing to undo on the server; always safe for this instance's references."""
        self._check_ref(ref)

    def terminate(self, ref: RuntimeRef, approval_ref: str, scope: Scope) -> None:
        """Stop the runs this process started in the session, then end it. The caller verified the approval."""
        self.require(Operation.TERMINATE)
        if not approval_ref or not approval_ref.strip():
            raise ApprovalRequired(details={"provider": self.name, "operation": Operation.TERMINATE.value})
        path = f"/api/sessions/{quote(ref.runtime_id, safe='')}"
        self._open_session(ref, allow_ended=False)
        with self._lock:
            runs = sorted(self._runs.pop(ref.runtime_id, set()))
        for run_id in runs:
            try:
                self.http.json("POST", f"/v1/runs/{quote(run_id, safe='')}/stop")
            except RuntimeNotFound:
                continue  # finished and forgotten
        self.http.json("PATCH", path, json_body={"end_reason": "terminated"})
        logger.info(
            "hermes %s: ended %s, %d runs stopped (%s)", self.name, ref.runtime_id, len(runs), scope.correlation_id
        )

    def close(self) -> None:
        self.http.close()

    # --- references ----------------------------------------------------------------------------------

    def _session(self, item: dict[str, Any]) -> RuntimeSession:
        return RuntimeSession(
            ref=RuntimeRef(instance=self.name, runtime_id=item["id"], identity={"endpoint": self.endpoint}),
            title=str(item.get("title") or item["id"]),
            status="exited" if item.get("ended_at") else "running",
            created_at=_time(item.get("started_at")),
            last_activity_at=_time(item.get("last_active") or item.get("updated_at")),
        )

    def _check_ref(self, ref: RuntimeRef) -> None:
        if ref.instance != self.name or (ref.identity or {}).get("endpoint") != self.endpoint or not ref.runtime_id:
            raise RuntimeNotFound(details={"provider": self.name})

    def _open_session(self, ref: RuntimeRef, *, allow_ended: bool) -> dict[str, Any]:
        self._check_ref(ref)
        body = self.http.json("GET", f"/api/sessions/{quote(ref.runtime_id, safe='')}")
        item = body.get("session", body) if isinstance(body, dict) else None
        if not isinstance(item, dict) or item.get("id") != ref.runtime_id:
            raise RuntimeNotFound(details={"provider": self.name})
        if item.get("ended_at") and not allow_ended:
            raise RuntimeNotFound(details={"provider": self.name})
        return item
