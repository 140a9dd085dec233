"""A local stand-in of an OpenAI-compatible chat-completions server, over real HTTP.

Behaviour by the requested model name: ``error-<status>`` answers with that status, ``slow`` waits
``slow_seconds`` before answering, ``held`` waits until the test sets ``release`` (at most a minute),
``empty`` answers with no content; ``drip`` streams its answer a word every ``drip_seconds`` (``finished`` is
set once a streamed answer is complete); anything else answers ``stand-in answer to: <the last user message>``,
streamed as server-sent events when asked. Every request body is kept in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    # Many turns may ask at once (bench/b_fleet_model.py): socketserver's backlog of 5 would drop their
    # connection attempts, and each retry would add a second or more to a turn.
    request_queue_size = 128


class ChatStandIn:
    def __init__(self, slow_seconds: float = 3.0, drip_seconds: float = 0.2) -> None:
        self.requests: list[dict[str, Any]] = []
        self.slow_seconds = slow_seconds
        self.drip_seconds = drip_seconds
        self.finished = threading.Event()
        self.release = threading.Event()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                standin.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                with suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                    standin.answer(self, body)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> ChatStandIn:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        if handler.path != "/v1/chat/completions":
            self._json(handler, 404, {"error": {"message": "no such route"}})
            return
        model = str(body.get("model", ""))
        if model.startswith("error-"):
            self._json(handler, int(model.removeprefix("error-")), {"error": {"message": "stand-in failure"}})
            return
        if model == "slow":
            time.sleep(self.slow_seconds)
        if model == "held":
            self.release.wait(timeout=60)
        users = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"]
        text = "" if model == "empty" else f"stand-in answer to: {users[-1] if users else ''}"
        if body.get("stream"):
            self._stream(handler, model, text)
        else:
            message = {"role": "assistant", "content": text}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            self._json(handler, 200, {**self._base(model), "object": "chat.completion", "choices": [choice]})

    @staticmethod
    def _base(model: str) -> dict[str, Any]:
        return {"id": "chatcmpl-standin", "created": int(time.time()), "model": model}

    @staticmethod
    def _json(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _stream(self, handler: BaseHTTPRequestHandler, model: str, text: str) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        words = text.split(" ")
        for i, word in enumerate(words):
            if model == "drip" and i:
                time.sleep(self.drip_seconds)
            delta = {"content": word + (" " if i < len(words) - 1 else "")}
            chunk = {
                **self._base(model),
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            }
            handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            handler.wfile.flush()
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
        self.finished.set()


@contextmanager
def running_chat_standin() -> Iterator[ChatStandIn]:
    standin = ChatStandIn(slow_seconds=3.0).start()
    try:
        yield standin
    finally:
        standin.stop()
