"""A local stand-in of an OpenAI-compatible chat-completions server, over real HTTP.

Behaviour by the requested model name: ``error-<status>`` answers with that status, ``slow`` waits
``slow_seconds`` before answering, ``held`` waits until the test sets ``release`` (at most a minute),
``empty`` answers with no content; ``drip`` streams its answer a word every ``drip_seconds`` (``finished`` is
set once a streamed answer is complete); ``broken`` streams half its answer and drops the connection;
anything else answers ``stand-in answer to: <the last user message>``, streamed as server-sent events when
asked. Every request body is kept in ``requests``.

Like the OpenAI API, every whole answer carries ``usage`` (``usage_of``: prompt tokens a character count of the
messages over four, the first message's counted as cached; completion tokens one a word; reasoning tokens
when a reasoning effort was asked for); a streamed one only when asked (``stream_options.include_usage``), in
a last chunk with no choices, and each chunk before it has ``"usage": null``.
"""

from __future__ import annotations

import json
import socket
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
            self._stream(handler, body, model, text)
        else:
            message = {"role": "assistant", "content": text}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            answer = {
                **self._base(model),
                "object": "chat.completion",
                "choices": [choice],
                "usage": usage_of(body, text),
            }
            self._json(handler, 200, answer)

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

    def _stream(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], model: str, text: str) -> None:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        if model == "broken":
            # A declared length the body never reaches: the client sees the connection drop mid-answer.
            handler.send_header("Content-Length", "100000")
        handler.end_headers()
        words = text.split(" ")
        for i, word in enumerate(words):
            if model == "drip" and i:
                time.sleep(self.drip_seconds)
            if model == "broken" and i == len(words) // 2:
                handler.wfile.flush()
                handler.close_connection = True
                handler.connection.shutdown(socket.SHUT_RDWR)
                return
            delta = {"content": word + (" " if i < len(words) - 1 else "")}
            chunk = {
                **self._base(model),
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                **({"usage": None} if include_usage else {}),
            }
            handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            handler.wfile.flush()
        if include_usage:
            last = {
                **self._base(model),
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": usage_of(body, text),
            }
            handler.wfile.write(f"data: {json.dumps(last)}\n\n".encode())
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
        self.finished.set()


def usage_of(body: dict[str, Any], text: str) -> dict[str, Any]:
    """The ``usage`` the stand-in reports for an answer ``text`` to the request ``body``."""
    messages = body.get("messages", [])
    prompt = sum(len(m.get("content") or "") for m in messages) // 4 + 1
    cached = min(len(messages[0].get("content") or "") // 4, prompt) if messages else 0
    completion = len(text.split(" ")) if text else 0
    reasoning = 3 if body.get("reasoning_effort") else 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion + reasoning,
        "total_tokens": prompt + completion + reasoning,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


@contextmanager
def running_chat_standin() -> Iterator[ChatStandIn]:
    standin = ChatStandIn(slow_seconds=3.0).start()
    try:
        yield standin
    finally:
        standin.stop()
