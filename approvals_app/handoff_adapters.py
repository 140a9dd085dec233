"""Mos coordination adapters: how a hand-off reaches Mos and how results come back (seed 001).

- ``redis``: ``XADD`` to ``TESS_MOS_HANDOFF_STREAM`` (``mos:handoffs``); Mos appends results to
  ``TESS_MOS_RESULT_STREAM`` (``mos:results``), read back through the consumer group ``TESS_MOS_RESULT_GROUP``
  (an entry is acknowledged only after its result is committed; a dead reader's entries are claimed again).
- ``webhook``: ``POST TESS_MOS_WEBHOOK_URL`` with ``X-Tess-Signature: sha256=<HMAC-SHA256 of the body>``
  (the body names the sending gateway, ``instance``, so the signature covers it);
  Mos posts results to ``/api/v1/handoffs/<id>/result/`` signed the same way with the same secret.
- ``none`` (the embedded default): no adapter; hand-offs are recorded and stay queued.

Nothing here touches the database: ``handoffs`` owns the records and calls these.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from django.conf import settings

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Tess-Signature"
SIGNATURE_PREFIX = "sha256="


class MosTransient(Exception):
    """Mos could not be reached or asked us to retry; the dispatch is tried again later."""

    def __init__(self, code: str) -> None:
        self.code = code
        super().__init__(code)


class MosRefused(Exception):
    """Mos refused the hand-off for good (a 4xx): retrying would not help."""

    def __init__(self, code: str) -> None:
        self.code = code
        super().__init__(code)


def sign(secret: str, body: bytes) -> str:
    return SIGNATURE_PREFIX + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signature_valid(secret: str, body: bytes, header: str | None) -> bool:
    """Constant-time check of ``header`` against the body's signature; no secret means nothing verifies."""
    if not secret or not header or not header.startswith(SIGNATURE_PREFIX):
        return False
    return hmac.compare_digest(sign(secret, body), header)


@dataclass(frozen=True)
class Envelope:
    """What Mos receives: ids, the operator's request, and where the result goes back."""

    id: str
    correlation_id: str
    tenant: str
    session_id: str | None
    summary: str
    payload: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {
            # Which Tess gateway sent it (TESS_INSTANCE_ID): inside the body, so the signature covers it.
            "instance": settings.TESS_INSTANCE_ID or None,
            "id": self.id,
            "correlation_id": self.correlation_id,
            "tenant": self.tenant,
            "session_id": self.session_id,
            "summary": self.summary,
            "payload": self.payload,
            "result_path": f"/api/v1/handoffs/{self.id}/result/",
        }


@dataclass(frozen=True)
class MosResult:
    entry_id: str
    handoff_id: str
    status: str
    result: Any


class MosAdapter(Protocol):
    name: str

    def dispatch(self, envelope: Envelope) -> None:
        """Deliver one hand-off. Raise ``MosTransient`` to retry later, ``MosRefused`` to fail it."""

    def close(self) -> None: ...


class WebhookAdapter:
    name = "webhook"

    def __init__(self, *, url: str, secret: str, timeout: float) -> None:
        self.url, self.secret, self.timeout = url, secret, timeout

    def dispatch(self, envelope: Envelope) -> None:
        body = json.dumps(envelope.as_json(), sort_keys=True, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(self.secret, body)}
        try:
            response = httpx.post(self.url, content=body, headers=headers, timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise MosTransient(f"webhook_{type(exc).__name__.lower()}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise MosTransient(f"webhook_status_{response.status_code}")
        if response.status_code >= 400:
            raise MosRefused(f"webhook_status_{response.status_code}")

    def close(self) -> None:
        return None


class RedisStreamAdapter:
    name = "redis"

    def __init__(self, *, url: str, stream: str, results: str, group: str) -> None:
        import redis

        self.client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        self.stream, self.results, self.group = stream, results, group

    def close(self) -> None:
        self.client.close()

    def dispatch(self, envelope: Envelope) -> None:
        import redis

        data = envelope.as_json()
        fields = {
            key: json.dumps(value) if isinstance(value, dict) else str(value or "") for key, value in data.items()
        }
        try:
            self.client.xadd(self.stream, fields)  # type: ignore[arg-type]
        except redis.RedisError as exc:
            raise MosTransient(f"redis_{type(exc).__name__.lower()}") from exc

    def _ensure_group(self) -> None:
        import redis

        try:
            # From the stream's start: results appended before the group existed are not lost.
            self.client.xgroup_create(self.results, self.group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def read_results(
        self, apply: Callable[[MosResult], None], *, consumer: str | None = None, count: int = 100, idle_ms: int = 60000
    ) -> int:
        """Apply every waiting result, acknowledging each only after ``apply`` returned (it commits).

        Entries left unacknowledged by a reader that died for ``idle_ms`` are claimed and applied again;
        ``apply`` is idempotent per hand-off and status. Returns how many entries were handled.
        """
        self._ensure_group()
        name = consumer or f"{socket.gethostname()}-{os.getpid()}"
        # A dead reader's entries become ours; then ours not yet acknowledged ("0"); then new ones (">").
        self.client.xautoclaim(self.results, self.group, name, min_idle_time=idle_ms, count=count)
        entries: dict[Any, Any] = {}
        for start in ("0", ">"):
            response: Any = self.client.xreadgroup(self.group, name, {self.results: start}, count=count)
            for _stream, items in response or []:
                for entry_id, fields in items:
                    entries.setdefault(entry_id, fields)
        handled = 0
        for entry_id, fields in entries.items():
            if not fields:  # deleted from the stream meanwhile
                self.client.xack(self.results, self.group, entry_id)
                continue
            result = _parse(entry_id, fields)
            if result is not None:
                try:
                    apply(result)
                except Exception:
                    logger.exception("could not apply Mos result %s; it stays pending", result.entry_id)
                    continue
            self.client.xack(self.results, self.group, entry_id)
            handled += 1
        return handled


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _parse(entry_id: Any, fields: dict[Any, Any]) -> MosResult | None:
    data = {_text(k): _text(v) for k, v in fields.items()}
    handoff_id, status = data.get("handoff_id", ""), data.get("status", "")
    if not handoff_id or not status:
        logger.warning("Mos result %s lacks handoff_id or status; acknowledged and dropped", _text(entry_id))
        return None
    raw = data.get("result", "")
    try:
        result: Any = json.loads(raw) if raw else None
    except ValueError:
        result = {"text": raw}
    return MosResult(entry_id=_text(entry_id), handoff_id=handoff_id, status=status, result=result)


def configured_adapter() -> MosAdapter | None:
    """The adapter ``TESS_MOS_ADAPTER`` names, or None for ``none``."""
    kind = settings.TESS_MOS_ADAPTER
    if kind == "webhook":
        return WebhookAdapter(
            url=settings.TESS_MOS_WEBHOOK_URL,
            secret=settings.TESS_MOS_WEBHOOK_SECRET,
            timeout=float(settings.TESS_MOS_WEBHOOK_TIMEOUT_SECONDS),
        )
    if kind == "redis":
        return redis_adapter()
    return None


def redis_adapter() -> RedisStreamAdapter:
    if not settings.REDIS_URL:
        raise MosTransient("redis_not_configured")
    return RedisStreamAdapter(
        url=settings.REDIS_URL,
        stream=settings.TESS_MOS_HANDOFF_STREAM,
        results=settings.TESS_MOS_RESULT_STREAM,
        group=settings.TESS_MOS_RESULT_GROUP,
    )
