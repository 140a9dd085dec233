"""A local stand-in of an OpenAI-compatible chat-completions server, over real HTTP.

Behaviour by the requested model name: ``error-<status>`` answers with that status, ``slow`` waits
``slow_seconds`` before answering, ``held`` waits until the test sets ``release`` (at most a minute),
``empty`` answers with no content; ``drip`` streams its answer a word every ``drip_seconds`` (``finished`` is
set once a streamed answer is complete); ``tool-<name>`` asks for a call of the tool ``<name>`` whose arguments
are the last user message's text (a JSON object), and once that call's result is in the conversation answers
in words; anything else answers ``stand-in answer to: <the last user message>``, streamed as server-sent
events when asked, with a last chunk of token usage when ``stream_options.include_usage`` asks for one. A user
message's content may be a string or a list of text parts, as the API accepts both. Every request body is
kept in ``requests``; ``disconnected`` is set when a client closes its connection before the answer is
complete.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
        self.disconnected = threading.Event()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                standin.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                try:
                    standin.answer(self, body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout or a stop)
                    standin.disconnected.set()

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
        messages = body.get("messages", [])
        users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
        if model.startswith("tool-") and not (messages and messages[-1].get("role") == "tool"):
            self._tool_call(handler, body, model.removeprefix("tool-"), users[-1] if users else "{}")
            return
        if model.startswith("tool-"):
            text = f"stand-in saw the tool result: {_text(messages[-1].get('content'))}"
        else:
            text = "" if model == "empty" else f"stand-in answer to: {users[-1] if users else ''}"
        if body.get("stream"):
            self._stream(handler, body, model, text)
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

    @staticmethod
    def _usage(body: dict[str, Any], text: str) -> dict[str, int]:
        """Tokens counted as words: enough for a caller to show it reads what was reported."""
        prompt = sum(len(_text(m.get("content")).split()) for m in body.get("messages", []))
        completion = len(text.split())
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _tool_call(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], name: str, arguments: str) -> None:
        model = str(body.get("model", ""))
        call = {"id": "call_standin", "type": "function", "function": {"name": name, "arguments": arguments}}
        if not body.get("stream"):
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
            self._json(handler, 200, {**self._base(model), "object": "chat.completion", "choices": [choice]})
            return
        self._sse_start(handler)
        delta = {"role": "assistant", "tool_calls": [{"index": 0, **call}]}
        for choice in (
            {"index": 0, "delta": delta, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": "tool_calls"},
        ):
            self._sse(handler, {**self._base(model), "object": "chat.completion.chunk", "choices": [choice]})
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()

    @staticmethod
    def _sse_start(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()

    @staticmethod
    def _sse(handler: BaseHTTPRequestHandler, chunk: dict[str, Any]) -> None:
        handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        handler.wfile.flush()

    def _stream(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], model: str, text: str) -> None:
        self._sse_start(handler)
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
            self._sse(handler, chunk)
        if (body.get("stream_options") or {}).get("include_usage"):
            usage_chunk = {**self._base(model), "object": "chat.completion.chunk", "choices": []}
            self._sse(handler, {**usage_chunk, "usage": self._usage(body, text)})
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
        self.finished.set()


def _text(content: Any) -> str:
    """A message's text: its content string, or its text parts joined."""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


@contextmanager
def running_chat_standin() -> Iterator[ChatStandIn]:
    standin = ChatStandIn(slow_seconds=3.0).start()
    try:
        yield standin
    finally:
        standin.stop()
