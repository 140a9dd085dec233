"""A local stand-in of plast-mem's documented v0 HTTP API, served over real HTTP on a free local port.

Based on moeru-ai/plast-mem at commit d7b5768: the routes of ``crates/server/src/api/mod.rs``
(``add_message``, ``import_batch_messages``, ``recent_memory/raw``, ``retrieve_memory/raw``,
``context_pre_retrieve``, all ``POST /api/v0/...``), the request and response shapes of their handler
modules, ``docs/architecture/retrieve_memory.md``, and ``crates/shared/src/error.rs`` for errors. Written
from those documents, not from their code. Reproduced quirks:

- errors are plain-text bodies (``text/plain``), never JSON;
- an empty message content or query is answered with HTTP 500 ("... cannot be empty");
- input timestamps are integer milliseconds since the epoch (anything else: 422, as a typed JSON
  extractor answers); output timestamps are RFC 3339 strings;
- a malformed JSON body is 400, a body missing a field or with a non-UUID ``conversation_id`` is 422, a
  body without ``Content-Type: application/json`` is 415;
- ``recent_memory`` limits clamp to 1..100, newest first; there is no delete route (404).

Simplification: the real server segments messages into episodes and consolidates facts asynchronously
with a model; here every accepted message becomes one episode and one known fact at once, scored by how
many query words it contains (so "retrieval" is deterministic).
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Reject(Exception):
    def __init__(self, status: int, body: str) -> None:
        self.status = status
        self.body = body


@dataclass
class StandInState:
    episodes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    fail_next: list[tuple[int, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _rfc3339(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z")


def _uuid(body: dict[str, Any]) -> str:
    if "conversation_id" not in body:
        raise _Reject(422, "Failed to deserialize the JSON body into the target type: missing field `conversation_id`")
    try:
        return str(uuid.UUID(str(body["conversation_id"])))
    except ValueError:
        raise _Reject(
            422, "Failed to deserialize the JSON body into the target type: conversation_id: invalid UUID"
        ) from None


def _message(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict) or "role" not in raw or "content" not in raw:
        raise _Reject(422, "Failed to deserialize the JSON body into the target type: missing field `content`")
    ts = raw.get("timestamp")
    if ts is not None and (not isinstance(ts, int) or isinstance(ts, bool)):
        raise _Reject(422, "Failed to deserialize the JSON body into the target type: timestamp: invalid type")
    now_ms = int(datetime.now(tz=UTC).timestamp() * 1000)
    return {"role": str(raw["role"]), "content": str(raw["content"]), "timestamp_ms": ts if ts is not None else now_ms}


def _score(text: str, query: str) -> float:
    words = {w for w in query.casefold().split() if len(w) > 2}
    if not words:
        return 0.0
    lowered = text.casefold()
    return sum(1 for w in words if w in lowered) / len(words)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._text(404, "")

    def do_DELETE(self) -> None:
        self._text(404, "")  # plast-mem has no delete route

    def do_POST(self) -> None:
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        route = self.path.removeprefix("/api/v0/")
        handlers = {
            "add_message": self._add_message,
            "import_batch_messages": self._import_batch,
            "recent_memory/raw": self._recent_raw,
            "retrieve_memory/raw": self._retrieve_raw,
            "context_pre_retrieve": self._pre_retrieve,
        }
        if not self.path.startswith("/api/v0/") or route not in handlers:
            self._text(404, "")
            return
        try:
            if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
                raise _Reject(415, "Expected request with `Content-Type: application/json`")
            try:
                body = json.loads(raw)
            except ValueError:
                raise _Reject(400, "Failed to parse the request body as JSON") from None
            if not isinstance(body, dict):
                raise _Reject(422, "Failed to deserialize the JSON body into the target type: expected a map")
            with state.lock:
                state.requests.append((route, body))
                if state.fail_next:
                    raise _Reject(*state.fail_next.pop(0))
                status, payload = handlers[route](state, body)
        except _Reject as reject:
            self._text(reject.status, reject.body)
            return
        if isinstance(payload, str):
            self._text(status, payload)
        else:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def _text(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # --- routes -------------------------------------------------------------------------------------

    def _store(self, state: StandInState, conversation: str, messages: list[dict[str, Any]]) -> None:
        episodes = state.episodes.setdefault(conversation, [])
        for m in messages:
            at = _rfc3339(m["timestamp_ms"])
            episodes.append(
                {
                    "id": str(uuid.uuid4()),
                    "conversation_id": conversation,
                    "messages": [{"role": m["role"], "content": m["content"], "timestamp": at}],
                    "title": m["content"].splitlines()[0][:60],
                    "content": m["content"],
                    "classification": "informative",
                    "stability": 1.0,
                    "difficulty": 5.0,
                    "surprise": 0.0,
                    "start_at": at,
                    "end_at": at,
                    "created_at": at,
                    "last_reviewed_at": at,
                    "consolidated_at": None,
                }
            )

    def _add_message(self, state: StandInState, body: dict[str, Any]) -> tuple[int, Any]:
        conversation = _uuid(body)
        message = _message(body.get("message"))
        if message["content"] == "":
            raise _Reject(500, "Message content cannot be empty")
        self._store(state, conversation, [message])
        return 200, {"accepted": True}

    def _import_batch(self, state: StandInState, body: dict[str, Any]) -> tuple[int, Any]:
        conversation = _uuid(body)
        if not isinstance(body.get("messages"), list):
            raise _Reject(422, "Failed to deserialize the JSON body into the target type: missing field `messages`")
        messages = [_message(m) for m in body["messages"]]
        if any(m["content"] == "" for m in messages):
            raise _Reject(500, "Message content cannot be empty")
        self._store(state, conversation, messages)
        return 200, {"accepted": True}

    def _recent_raw(self, state: StandInState, body: dict[str, Any]) -> tuple[int, Any]:
        conversation = _uuid(body)
        limit = max(1, min(int(body.get("limit", 10)), 100))
        episodes = sorted(state.episodes.get(conversation, []), key=lambda e: e["created_at"], reverse=True)
        return 200, episodes[:limit]

    def _query(self, body: dict[str, Any]) -> str:
        if "query" not in body:
            raise _Reject(422, "Failed to deserialize the JSON body into the target type: missing field `query`")
        query = str(body["query"])
        if query == "":
            raise _Reject(500, "Query cannot be empty")
        return query

    def _ranked(self, state: StandInState, conversation: str, query: str) -> list[tuple[float, dict[str, Any]]]:
        scored = [(_score(e["content"], query), e) for e in state.episodes.get(conversation, [])]
        return sorted([pair for pair in scored if pair[0] > 0], key=lambda pair: -pair[0])

    def _retrieve_raw(self, state: StandInState, body: dict[str, Any]) -> tuple[int, Any]:
        conversation = _uuid(body)
        query = self._query(body)
        ranked = self._ranked(state, conversation, query)
        episodic = [{**e, "score": s} for s, e in ranked[: int(body.get("episodic_limit", 10))]]
        semantic = [
            {"id": e["id"], "conversation_id": conversation, "category": "fact", "fact": e["content"],
             "source_episodic_ids": [e["id"]], "valid_at": e["created_at"], "invalid_at": None, "score": s}
            for s, e in ranked[: int(body.get("semantic_limit", 20))]
        ]  # fmt: skip
        return 200, {"semantic": semantic, "episodic": episodic}

    def _pre_retrieve(self, state: StandInState, body: dict[str, Any]) -> tuple[int, Any]:
        conversation = _uuid(body)
        query = self._query(body)
        ranked = self._ranked(state, conversation, query)[: int(body.get("semantic_limit", 20))]
        if not ranked:
            return 200, ""
        return 200, "## Known Facts\n" + "\n".join(f"- {e['content']}" for _, e in ranked)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: StandInState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


class PlastMemStandIn:
    """Start with ``start()``; ``url`` is its base URL; ``stop()`` shuts it down."""

    def __init__(self) -> None:
        self.state = StandInState()
        self._server = _Server(self.state)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> PlastMemStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def requests_to(self, route: str) -> list[dict[str, Any]]:
        with self.state.lock:
            return [body for r, body in self.state.requests if r == route]


def unreachable_url() -> str:
    """A local URL nothing listens on: bind a port, then close it."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
