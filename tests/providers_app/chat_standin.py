"""A local stand-in of an OpenAI-compatible chat-completions server, over real HTTP.

Behaviour by the requested model name: ``error-<status>`` answers with that status, ``slow`` waits
``slow_seconds`` before answering, ``held`` waits until the test sets ``release`` (at most a minute),
``empty`` answers with no content; ``drip`` streams its answer a word every ``drip_seconds``, after
``think_seconds`` of silence (``finished`` is set once a streamed answer is complete); ``broken`` streams half
its answer and drops the connection; ``tool-<name>`` asks for a call of the tool ``<name>`` whose arguments are
the last user message's text (a JSON object), and once that call's result is in the conversation answers in
words; anything else answers ``stand-in answer to: <the last user message>``, streamed as server-sent events
when asked. A user message's content may be a string or a list of text parts, as the API accepts both. Every
request body is kept in ``requests``.

While it holds or drips an answer it watches the connection: a client that closes it (a stopped turn) is
counted in ``closed`` (and ``closed_event`` and ``disconnected`` set), and the answer ends there.
``first_tokens`` holds the wall-clock time (``time.time()``) each streamed answer's first piece was written.

Like the OpenAI API, every whole answer carries ``usage`` (``usage_of``: prompt tokens a character count of the
messages over four, the first message's counted as cached; completion tokens one a word; reasoning tokens
when a reasoning effort was asked for); a streamed one only when asked (``stream_options.include_usage``), in
a last chunk with no choices, and each chunk before it has ``"usage": null``.

A person can run it beside ``make run``: ``python -m tests.providers_app.chat_standin --port 8765`` (see the
README, "Watching a reply stream").
"""

from __future__ import annotations

import argparse
import json
import select
import socket
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
    def __init__(
        self, slow_seconds: float = 3.0, drip_seconds: float = 0.2, port: int = 0, think_seconds: float = 0.0
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        self.slow_seconds = slow_seconds
        self.drip_seconds = drip_seconds
        self.think_seconds = think_seconds  # a drip answer's silence before its first word (headers sent)
        self.finished = threading.Event()
        self.release = threading.Event()
        self.closed = 0  # answers whose client closed the connection before the answer's end
        self.closed_event = threading.Event()
        self.disconnected = self.closed_event  # the same: a client closed its connection before the end
        self.first_tokens: list[float] = []
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
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test, a stop)
                    standin._gone()

        self.server = _Server(("127.0.0.1", port), Handler)
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
            deadline = time.monotonic() + 60
            while not self.release.is_set() and time.monotonic() < deadline:
                if self._closed_by_client(handler, 0.05):
                    return
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
    def _sse_start(handler: BaseHTTPRequestHandler, *, broken: bool = False) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        if broken:
            # A declared length the body never reaches: the client sees the connection drop mid-answer.
            handler.send_header("Content-Length", "100000")
        handler.end_headers()

    @staticmethod
    def _sse(handler: BaseHTTPRequestHandler, chunk: dict[str, Any]) -> None:
        handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        handler.wfile.flush()

    def _stream(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], model: str, text: str) -> None:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self._sse_start(handler, broken=model == "broken")
        words = text.split(" ")
        if model == "drip" and self.think_seconds and self._closed_by_client(handler, self.think_seconds):
            return
        for i, word in enumerate(words):
            if model == "drip" and i and self._closed_by_client(handler, self.drip_seconds):
                return
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
            self._sse(handler, chunk)
            if not i:
                self.first_tokens.append(time.time())
        if include_usage:
            last = {**self._base(model), "object": "chat.completion.chunk", "choices": []}
            self._sse(handler, {**last, "usage": usage_of(body, text)})
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
        self.finished.set()

    def _closed_by_client(self, handler: BaseHTTPRequestHandler, seconds: float) -> bool:
        """Wait ``seconds``, or less if the client closes the connection meanwhile; say whether it did."""
        sock = handler.connection
        readable, _, _ = select.select([sock], [], [], seconds)
        if not readable:
            return False
        try:
            gone = sock.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            gone = True
        if gone:
            self._gone()
        else:  # the client sent more (it should not): go on after the rest of the wait
            time.sleep(seconds)
        return gone

    def _gone(self) -> None:
        self.closed += 1
        self.closed_event.set()


def usage_of(body: dict[str, Any], text: str) -> dict[str, Any]:
    """The ``usage`` the stand-in reports for an answer ``text`` to the request ``body``."""
    messages = body.get("messages", [])
    prompt = sum(len(_text(m.get("content"))) for m in messages) // 4 + 1
    cached = min(len(_text(messages[0].get("content"))) // 4, prompt) if messages else 0
    completion = len(text.split(" ")) if text else 0
    reasoning = 3 if body.get("reasoning_effort") else 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion + reasoning,
        "total_tokens": prompt + completion + reasoning,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


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


def main() -> None:
    """Serve the stand-in until Ctrl-C, for a person watching replies stream (``TESS_MODEL=drip``)."""
    parser = argparse.ArgumentParser(description="A local OpenAI-compatible chat-completions stand-in.")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--drip-seconds", type=float, default=0.2, help="between two words of a drip answer")
    args = parser.parse_args()
    standin = ChatStandIn(drip_seconds=args.drip_seconds, port=args.port).start()
    print(f"chat stand-in at {standin.base_url} (models: drip, slow, held, empty, error-<status>; Ctrl-C stops it)")
    try:
        standin.thread.join()
    except KeyboardInterrupt:
        standin.stop()


if __name__ == "__main__":
    main()
