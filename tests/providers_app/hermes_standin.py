"""A local stand-in of the Hermes Agent API server's documented routes, over real HTTP on a real port.

Modelled on NousResearch/hermes-agent ``website/docs/user-guide/features/api-server.md``: Bearer auth on
everything but ``/health``; ``/v1/capabilities``; the sessions routes (``/api/sessions`` with
``include_children``, ``limit``, ``offset``; one session; ``PATCH`` with ``end_reason``; ``/messages``);
``POST /v1/runs`` with ``Idempotency-Key`` (replay: 202, same ``run_id``, ``Idempotency-Replayed: true``;
same key, other payload: 409 ``idempotency_key_conflict``); ``GET /v1/runs/{id}``; ``/events`` as
server-sent events (HTTP/1.1 chunked, so a cut stream is a real protocol break); ``/stop``. Tests drive
the runtime side directly: ``add_message``, ``finish_run``, ``cut_after``.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

KEY = re.compile(r"[\x21-\x7e]{1,255}")
TERMINAL = {"run.completed", "run.failed", "run.cancelled"}


class HermesStandIn:
    def __init__(self, token: str, *, run_submission: bool = True, run_stop: bool = True) -> None:
        self.token = token
        self.features = {
            "chat_completions": True,
            "responses_api": True,
            "run_submission": run_submission,
            "run_status": True,
            "run_events_sse": True,
            "run_stop": run_stop,
        }
        self.sessions: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, list[dict[str, Any]]] = {}
        self.runs: dict[str, dict[str, Any]] = {}
        self.idempotency: dict[str, tuple[str, str]] = {}
        self.received: dict[str, list[str]] = {}
        self.cut_after: dict[str, int] = {}  # run id → events sent before the connection is dropped
        self.seen_authorization: list[str] = []
        self.condition = threading.Condition()
        self._message_ids = iter(range(1, 10**9))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- the runtime side, driven by tests -------------------------------------------------------------

    def new_session(self, title: str | None, parent: str | None = None) -> dict[str, Any]:
        with self.condition:
            session_id = time.strftime("%Y%m%d_%H%M%S_") + secrets.token_hex(3)
            session = {
                "id": session_id,
                "source": "api_server",
                "title": title,
                "parent_session_id": parent,
                "started_at": time.time(),
                "ended_at": None,
                "end_reason": None,
                "message_count": 0,
            }
            self.sessions[session_id] = session
            self.messages[session_id] = []
            return dict(session)

    def add_message(self, session_id: str, role: str, content: str) -> None:
        with self.condition:
            self.messages[session_id].append(
                {
                    "id": next(self._message_ids),
                    "session_id": session_id,
                    "role": role,
                    "content": content,
                    "timestamp": time.time(),
                }
            )
            self.sessions[session_id]["message_count"] += 1

    def _event(self, run_id: str, event: str, **data: Any) -> None:
        run = self.runs[run_id]
        run["events"].append({"event": event, "run_id": run_id, "timestamp": time.time(), **data})
        self.condition.notify_all()

    def finish_run(self, run_id: str, answer: str, pieces: int = 3) -> None:
        """The agent answers: deltas, the stored assistant message, then ``run.completed``."""
        with self.condition:
            size = max(1, -(-len(answer) // pieces))
            for start in range(0, len(answer), size):
                self._event(run_id, "message.delta", delta=answer[start : start + size])
            self.add_message(self.runs[run_id]["session_id"], "assistant", answer)
            self.runs[run_id] |= {"status": "completed", "output": answer}
            self._event(run_id, "run.completed", status="completed")

    # --- HTTP ------------------------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in separate writes

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status: int, code: str) -> None:
                self._send(status, {"error": {"code": code, "message": code.replace("_", " ")}})

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length)) if length else {}

            def _authorized(self) -> bool:
                header = self.headers.get("Authorization", "")
                standin.seen_authorization.append(header)
                if header != f"Bearer {standin.token}":
                    self._error(401, "invalid_api_key")
                    return False
                return True

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_PATCH(self) -> None:
                self._route("PATCH")

            def _route(self, method: str) -> None:
                url = urlsplit(self.path)
                path, query = url.path, parse_qs(url.query)
                if method == "GET" and path in ("/health", "/v1/health"):
                    return self._send(200, {"status": "ok"})
                if not self._authorized():
                    return None
                parts = path.strip("/").split("/")
                if method == "GET" and path == "/v1/capabilities":
                    return self._send(
                        200,
                        {
                            "object": "hermes.api_server.capabilities",
                            "platform": "hermes-agent",
                            "auth": {"type": "bearer", "required": True},
                            "features": standin.features,
                        },
                    )
                if parts[:2] == ["api", "sessions"]:
                    return self._sessions(method, parts[2:], query)
                if parts[:2] == ["v1", "runs"]:
                    return self._runs(method, parts[2:])
                return self._error(404, "not_found")

            def _sessions(self, method: str, rest: list[str], query: dict[str, list[str]]) -> None:
                if not rest:
                    if method == "POST":
                        return self._send(200, {"session": standin.new_session(self._body().get("title"))})
                    children = query.get("include_children", ["false"])[0] == "true"
                    limit, offset = int(query.get("limit", ["20"])[0]), int(query.get("offset", ["0"])[0])
                    with standin.condition:
                        rows = [dict(s) for s in standin.sessions.values() if children or not s["parent_session_id"]]
                    return self._send(200, {"sessions": rows[offset : offset + limit], "total": len(rows)})
                with standin.condition:
                    session = standin.sessions.get(rest[0])
                    if session is None:
                        return self._error(404, "session_not_found")
                    if len(rest) == 1 and method == "GET":
                        return self._send(200, {"session": dict(session)})
                    if len(rest) == 1 and method == "PATCH":
                        body = self._body()
                        if "title" in body:
                            session["title"] = body["title"]
                        if body.get("end_reason"):
                            session |= {"end_reason": body["end_reason"], "ended_at": time.time()}
                        return self._send(200, {"session": dict(session)})
                    if rest[1:] == ["messages"] and method == "GET":
                        return self._send(200, {"messages": list(standin.messages[rest[0]])})
                return self._error(404, "not_found")

            def _runs(self, method: str, rest: list[str]) -> None:
                if not rest and method == "POST":
                    return self._create_run()
                with standin.condition:
                    run = standin.runs.get(rest[0]) if rest else None
                    if run is None:
                        return self._error(404, "run_not_found")
                    if len(rest) == 1 and method == "GET":
                        return self._send(200, {k: v for k, v in run.items() if k not in ("events", "input")})
                    if rest[1:] == ["stop"] and method == "POST":
                        if run["status"] == "running":
                            run["status"] = "cancelled"
                            standin._event(rest[0], "run.cancelled", status="cancelled")
                        return self._send(200, {"status": "stopping"})
                if rest[1:] == ["events"] and method == "GET":
                    return self._events(rest[0])
                return self._error(404, "not_found")

            def _create_run(self) -> None:
                key = self.headers.get("Idempotency-Key")
                body = self._body()
                if key is not None and not KEY.fullmatch(key):
                    return self._error(400, "invalid_idempotency_key")
                payload = json.dumps(body, sort_keys=True)
                with standin.condition:
                    if key is not None and key in standin.idempotency:
                        seen, run_id = standin.idempotency[key]
                        if seen != payload:
                            return self._error(409, "idempotency_key_conflict")
                        return self._send(
                            202, {"run_id": run_id, "status": "started"}, {"Idempotency-Replayed": "true"}
                        )
                    session_id = body.get("session_id") or standin.new_session(None)["id"]
                    run_id = "run_" + secrets.token_hex(8)
                    standin.runs[run_id] = {
                        "object": "hermes.run",
                        "run_id": run_id,
                        "status": "running",
                        "session_id": session_id,
                        "model": "hermes-agent",
                        "events": [],
                        "input": body.get("input", ""),
                    }
                    if key is not None:
                        standin.idempotency[key] = (payload, run_id)
                    standin.received.setdefault(session_id, []).append(str(body.get("input", "")))
                    standin.add_message(session_id, "user", str(body.get("input", "")))
                    standin._event(run_id, "run.started", status="running")
                return self._send(202, {"run_id": run_id, "status": "started"})

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _events(self, run_id: str) -> None:
                def has_more(run: str, sent: int) -> bool:
                    return len(standin.runs[run]["events"]) > sent

                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._chunk(b": connected\n\n")
                sent = 0
                cut = standin.cut_after.get(run_id)
                while True:
                    with standin.condition:
                        standin.condition.wait_for(partial(has_more, run_id, sent), timeout=30)
                        events = standin.runs[run_id]["events"][sent:]
                    if not events:
                        break
                    for event in events:
                        if cut is not None and sent >= cut:
                            self.close_connection = True
                            self.connection.shutdown(2)  # mid-stream: no terminating chunk
                            return
                        frame = f"event: {event['event']}\nid: {sent}\ndata: {json.dumps(event)}\n\n"
                        self._chunk(frame.encode())
                        sent += 1
                        if event["event"] in TERMINAL:
                            self.wfile.write(b"0\r\n\r\n")
                            return
                self.wfile.write(b"0\r\n\r\n")

        return Handler
