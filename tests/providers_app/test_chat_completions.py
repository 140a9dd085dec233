"""The chat-completions protocol at its edges, over real HTTP: what a compatible server may send that the
stand-in does not (events split over several ``data:`` lines, comments, an error inside a stream, an answer
that is not JSON), and what the adapter makes of each."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from providers_app.model_adapters import ModelError, ModelRequest, OpenAICompatibleAdapter, Prompt

PROMPT = Prompt(stable_prefix="policy", dynamic="", user_text="how are things?")


def _chunk(content: str) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": content}}]}


class Canned:
    """A server that answers every POST with ``body`` (bytes) as ``content_type``, status ``status``."""

    def __init__(self) -> None:
        self.body, self.content_type, self.status = b"", "application/json", 200
        canned = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(canned.status)
                self.send_header("Content-Type", canned.content_type)
                self.send_header("Content-Length", str(len(canned.body)))
                self.end_headers()
                self.wfile.write(canned.body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def adapter(self, *, stream: bool) -> OpenAICompatibleAdapter:
        base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        return OpenAICompatibleAdapter(
            base_url=base, api_key="sk-test", model="m", reasoning_effort="none", timeout=10.0, stream=stream
        )

    def events(self, *lines: str) -> None:
        self.body, self.content_type = "".join(line + "\n" for line in lines).encode(), "text/event-stream"


@pytest.fixture
def canned() -> Iterator[Canned]:
    server = Canned()
    yield server
    server.server.shutdown()
    server.server.server_close()


def ask(canned: Canned, *, stream: bool, seen: list[str] | None = None) -> str:
    request = ModelRequest(prompt=PROMPT, intent="conversation", on_delta=None if seen is None else seen.append)
    return canned.adapter(stream=stream).complete(request).text


def test_an_event_split_over_data_lines_with_comments_and_event_names_is_read_whole(canned: Canned) -> None:
    first = json.dumps(_chunk("Two "), indent=1).splitlines()  # one event, its JSON over several data lines
    canned.events(
        ": a comment the server sends to keep the connection open",
        "event: message",
        *(f"data: {line}" for line in first),
        "",
        "id: 2",
        f"data:{json.dumps(_chunk('agents wait.'))}",  # no space after the colon is allowed too
        "",
        "data: [DONE]",
        "",
    )
    seen: list[str] = []

    assert ask(canned, stream=True, seen=seen) == "Two agents wait."
    assert seen == ["Two ", "agents wait."]


def test_an_error_inside_a_stream_is_a_model_error_that_counts_what_came_before(canned: Canned) -> None:
    canned.events(
        f"data: {json.dumps(_chunk('Half an answer'))}",
        "",
        f"data: {json.dumps({'error': {'message': 'overloaded', 'type': 'server_error'}})}",
        "",
    )

    with pytest.raises(ModelError) as raised:
        ask(canned, stream=True)

    assert raised.value.code == "model_error" and raised.value.details["error"] == "ChatError"
    usage = raised.value.usage
    assert usage is not None and usage.source == "estimated" and usage.output_tokens == 4


@pytest.mark.parametrize("body", [b"<html>gateway</html>", b'["not", "an", "object"]'], ids=["html", "list"])
def test_an_answer_that_is_not_a_json_object_is_a_model_error(canned: Canned, body: bytes) -> None:
    canned.body = body

    with pytest.raises(ModelError) as raised:
        ask(canned, stream=False)

    assert raised.value.code == "model_error" and "status" not in raised.value.details


def test_a_whole_answer_without_choices_or_text_is_empty_not_a_crash(canned: Canned) -> None:
    canned.body = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": None}}]}).encode()

    with pytest.raises(ModelError, match="empty answer"):
        ask(canned, stream=False)


def test_a_stream_that_ends_without_done_keeps_what_it_sent(canned: Canned) -> None:
    canned.events(f"data: {json.dumps(_chunk('All done.'))}", "")

    assert ask(canned, stream=True) == "All done."
