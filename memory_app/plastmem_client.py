"""A small client of plast-mem's v0 HTTP API (moeru-ai/plast-mem, ``crates/server/src/api``).

Based on the documented routes (``docs/ARCHITECTURE.md``, ``docs/architecture/retrieve_memory.md``) and
the server's route declarations at commit d7b5768: every route is ``POST /api/v0/<name>`` with a JSON body
keyed by ``conversation_id`` (a UUID):

- ``add_message`` ``{conversation_id, message: {role, content, timestamp?}}`` → ``{"accepted": true}``
- ``import_batch_messages`` ``{conversation_id, messages: [{role, content, timestamp?}]}`` → ``{"accepted": true}``
- ``retrieve_memory/raw`` ``{conversation_id, query, episodic_limit?, semantic_limit?}`` →
  ``{"semantic": [...], "episodic": [...]}`` (each item flattened with a ``score``)
- ``recent_memory/raw`` ``{conversation_id, limit?}`` → a list of episodic memories, newest first
- ``context_pre_retrieve`` ``{conversation_id, query, semantic_limit?}`` → markdown (``text/plain``)

Quirks a client must live with: message timestamps are integers of milliseconds since the epoch on input
(RFC 3339 strings on output); errors are plain-text bodies, not JSON; an empty message content or query
is answered with HTTP 500 (not 400, whatever the OpenAPI annotations say); there is no delete route.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

# The fixed namespace under which Tess folds its namespaces into plast-mem conversation ids (UUIDv5).
# Never change it: every conversation id already written depends on it.
PLASTMEM_NAMESPACE = uuid.UUID("8c3b1f52-4d0e-5a7b-9e61-2f4a7d9c0b13")
ERROR_BODY_CHARS = 200


class PlastMemError(Exception):
    """plast-mem answered with an error status; ``body`` is its plain-text message, shortened."""

    def __init__(self, status: int, body: str) -> None:
        self.status = status
        self.body = body[:ERROR_BODY_CHARS]
        super().__init__(f"plast-mem answered {status}: {self.body}")

    @property
    def permanent(self) -> bool:
        """Retrying cannot help: a client error, or the 500 plast-mem gives for empty content or query."""
        return self.status < 500 or "cannot be empty" in self.body


class PlastMemUnreachable(Exception):
    """No answer from plast-mem (connection refused, timeout, broken connection)."""


def conversation_id(*parts: str) -> uuid.UUID:
    """A deterministic conversation id for a Tess namespace: UUIDv5 of the joined parts."""
    return uuid.uuid5(PLASTMEM_NAMESPACE, "/".join(parts))


def millis(at: datetime) -> int:
    return int(at.timestamp() * 1000)


@dataclass(frozen=True)
class PlastMemClient:
    base_url: str
    timeout: float = 5.0

    def _post(self, route: str, body: dict[str, Any]) -> httpx.Response:
        url = f"{self.base_url.rstrip('/')}/api/v0/{route}"
        try:
            response = httpx.post(url, json=body, timeout=self.timeout)
        except httpx.TransportError as exc:
            raise PlastMemUnreachable(exc.__class__.__name__) from exc
        if response.status_code >= 400:
            raise PlastMemError(response.status_code, response.text)
        return response

    def add_message(self, conversation: uuid.UUID, *, role: str, content: str, timestamp_ms: int) -> None:
        message = {"role": role, "content": content, "timestamp": timestamp_ms}
        self._post("add_message", {"conversation_id": str(conversation), "message": message})

    def import_batch_messages(self, conversation: uuid.UUID, messages: list[dict[str, Any]]) -> None:
        self._post("import_batch_messages", {"conversation_id": str(conversation), "messages": messages})

    def retrieve_memory_raw(self, conversation: uuid.UUID, *, query: str, limit: int) -> dict[str, Any]:
        body = {"conversation_id": str(conversation), "query": query, "episodic_limit": limit, "semantic_limit": limit}
        data: dict[str, Any] = self._post("retrieve_memory/raw", body).json()
        return data

    def recent_memory_raw(self, conversation: uuid.UUID, *, limit: int) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = self._post(
            "recent_memory/raw", {"conversation_id": str(conversation), "limit": limit}
        ).json()
        return data

    def context_pre_retrieve(self, conversation: uuid.UUID, *, query: str, semantic_limit: int) -> str:
        body = {"conversation_id": str(conversation), "query": query, "semantic_limit": semantic_limit}
        return self._post("context_pre_retrieve", body).text
