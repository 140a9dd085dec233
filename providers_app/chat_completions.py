"""The chat-completions protocol (``POST {base}/chat/completions``, OpenAI's API), spoken over httpx2.

Why not the ``openai`` SDK's client: per call it walks the request through its typed transform and builds an
object for every streamed chunk. A 21-message prompt streamed back from the local stand-in (in the same
process) cost 12.1-12.4 ms of CPU a call through the SDK and 3.3-3.8 ms here, the stand-in's share included in
both; with 32 turns waiting on a model, a turn server answers 16 of them a second, on the cores that also serve
the admin and the lists (``bench/b_fleet_model.py``).
The protocol a turn needs is small: one JSON request; an answer that is one JSON object, or server-sent events
(``data: <chunk>`` until ``data: [DONE]``) when streamed.

Errors come out as ``ChatError`` subclasses: ``ChatStatus`` for an answer other than 2xx (with its status),
``ChatTimeout`` when a connect, read or write waited longer than the timeout, ``ChatUnavailable`` when the
endpoint could not be reached or the connection broke mid-answer, and ``ChatError`` itself for an answer
that is not the protocol's (not JSON, or an ``error`` object inside a stream).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2

from .http_cancel import cancellable_transport
from .sse import sse_events

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class ChatError(Exception):
    pass


class ChatStatus(ChatError):
    def __init__(self, status: int) -> None:
        super().__init__(f"the endpoint answered with status {status}")
        self.status = status


class ChatTimeout(ChatError):
    pass


class ChatUnavailable(ChatError):
    pass


class ChatClient:
    """One endpoint's client: a pool of kept-alive connections that every thread of the process shares, over
    the transport that lets a stopped turn close its call (``http_cancel``)."""

    def __init__(self, *, base_url: str | None, api_key: str | None, timeout: float) -> None:
        self.url = (base_url or DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"
        headers = {"Authorization": f"Bearer {api_key or 'not-configured'}", "Accept": "application/json"}
        limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
        self._http = httpx2.Client(
            transport=cancellable_transport(limits=limits),
            headers=headers,
            timeout=httpx2.Timeout(timeout),
            trust_env=False,
        )

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """The whole answer to ``body`` (not streamed)."""
        with _mapped_errors():
            response = self._http.post(self.url, json=body)
            if not response.is_success:
                raise ChatStatus(response.status_code)
            return _object(response.content)

    def stream(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The chunks of the answer to ``body``, streamed (``"stream": true`` is added), as they arrive."""
        with _mapped_errors(), self._http.stream("POST", self.url, json={**body, "stream": True}) as response:
            if not response.is_success:
                response.read()
                raise ChatStatus(response.status_code)
            for sse in sse_events(response.iter_lines()):
                if sse.data == "[DONE]":
                    return
                chunk = _object(sse.data.encode())
                if "error" in chunk:
                    raise ChatError(f"the endpoint sent an error in the stream: {str(chunk['error'])[:200]}")
                yield chunk


@contextmanager
def _mapped_errors() -> Iterator[None]:
    try:
        yield
    except httpx2.TimeoutException as exc:
        raise ChatTimeout(str(exc)) from exc
    except httpx2.TransportError as exc:  # refused, reset, or a stream that ended before its end
        raise ChatUnavailable(str(exc) or type(exc).__name__) from exc
    except httpx2.HTTPError as exc:
        raise ChatError(str(exc)) from exc


def _object(data: bytes) -> dict[str, Any]:
    try:
        found = json.loads(data)
    except ValueError as exc:
        raise ChatError("the endpoint's answer is not JSON") from exc
    if not isinstance(found, dict):
        raise ChatError("the endpoint's answer is not a JSON object")
    return found
