"""HTTP to a Hermes Agent API server: Bearer auth from a secret Tess never logs, typed errors, SSE.

Per the Hermes Agent documentation (NousResearch/hermes-agent,
``website/docs/user-guide/features/api-server.md``): every route but ``/health`` needs
``Authorization: Bearer <API_SERVER_KEY>``; ``/v1/runs/{id}/events`` is a server-sent event stream.
The key comes from the instance's configuration as a file (``api_key_file``) or the name of an
environment variable (``api_key_env``), never as a value in the configuration; it is read when needed
and appears in no log line, error, health detail or ``repr``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.core.exceptions import ImproperlyConfigured

from .contract import ProviderConflict, ProviderError, ProviderUnavailable, RuntimeNotFound
from .sse import sse_events

logger = logging.getLogger(__name__)


class CredentialMissing(ProviderError):
    code = "provider_credential_missing"
    default_message = "The runtime provider's credential is not available."


class CredentialRefused(ProviderError):
    code = "provider_credential_refused"
    default_message = "The runtime provider refused Tess's credential."


@dataclass(frozen=True)
class SseEvent:
    event: str
    data: Any
    id: str = ""


def public_endpoint(base_url: str) -> str:
    """``scheme://host:port`` of the base URL: what health may show (no user info, path or query)."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}"


class HermesHttp:
    def __init__(self, *, name: str, config: dict[str, Any]) -> None:
        base_url = config.get("base_url")
        if not base_url or not isinstance(base_url, str) or urlsplit(base_url).scheme not in ("http", "https"):
            raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{name!r}] needs an http(s) 'base_url'.")
        if "api_key" in config:
            raise ImproperlyConfigured(
                f"TESS_RUNTIME_PROVIDERS[{name!r}]: give 'api_key_file' or 'api_key_env', never the key itself."
            )
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.key_file = str(config["api_key_file"]) if config.get("api_key_file") else None
        self.key_env = str(config["api_key_env"]) if config.get("api_key_env") else None
        if not self.key_file and not self.key_env:
            raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{name!r}] needs 'api_key_file' or 'api_key_env'.")
        timeout = float(config.get("timeout", 10.0))
        self.client = httpx.Client(base_url=self.base_url, timeout=timeout, follow_redirects=False)
        self.stream_timeout = httpx.Timeout(timeout, read=float(config.get("stream_read_timeout", 60.0)))

    def __repr__(self) -> str:
        return f"HermesHttp(name={self.name!r}, endpoint={public_endpoint(self.base_url)!r})"

    def _key(self) -> str:
        key = ""
        if self.key_file:
            try:
                key = Path(self.key_file).read_text().strip()
            except OSError:
                key = ""
        elif self.key_env:
            key = os.environ.get(self.key_env, "").strip()
        if not key:
            raise CredentialMissing(details={"provider": self.name})
        return key

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key()}", "Accept": "application/json", **(extra or {})}

    def _check(self, response: httpx.Response) -> None:
        status = response.status_code
        if status < 400:
            return
        if status in (401, 403):
            raise CredentialRefused(details={"provider": self.name})
        if status == 404:
            raise RuntimeNotFound(details={"provider": self.name})
        if status == 409:
            raise ProviderConflict(details={"provider": self.name, "code": _error_code(response)})
        if status >= 500 or status == 429:
            raise ProviderUnavailable(details={"provider": self.name, "status": status})
        raise ProviderError(details={"provider": self.name, "status": status, "code": _error_code(response)})

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        auth: bool = True,
    ) -> httpx.Response:
        try:
            response = self.client.request(
                method,
                path,
                json=json_body,
                params=params,
                headers=self._headers(headers) if auth else (headers or {}),
            )
        except httpx.TransportError as exc:
            # The exception names the URL only; never the request's headers.
            logger.warning("hermes %s: %s %s failed: %s", self.name, method, path, type(exc).__name__)
            raise ProviderUnavailable(details={"provider": self.name}) from exc
        self._check(response)
        return response

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        try:
            return response.json() if response.content else {}
        except ValueError as exc:
            raise ProviderError("The Hermes API server answered with something that is not JSON.") from exc

    def events(self, path: str) -> Iterator[SseEvent]:
        """Server-sent events from ``path`` as they arrive. A stream that breaks off (the connection drops
        or times out) raises ``ProviderUnavailable`` after the events read before it."""
        try:
            with self.client.stream(
                "GET", path, headers=self._headers({"Accept": "text/event-stream"}), timeout=self.stream_timeout
            ) as response:
                self._check(response)
                yield from parse_sse(response.iter_lines())
        except httpx.TransportError as exc:
            raise ProviderUnavailable("The event stream broke off.", details={"provider": self.name}) from exc

    def close(self) -> None:
        self.client.close()


def _error_code(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("code", ""))
    return str(body.get("code", "")) if isinstance(body, dict) else ""


def parse_sse(lines: Iterator[str]) -> Iterator[SseEvent]:
    """The server-sent events of ``lines`` (``sse_events``), their data JSON when it parses; an event that
    names no kind takes its payload's ``event`` or ``type``, else ``message``."""
    for sse in sse_events(lines):
        try:
            payload: Any = json.loads(sse.data)
        except ValueError:
            payload = sse.data
        event = sse.event
        if not event and isinstance(payload, dict):
            event = str(payload.get("event") or payload.get("type") or "")
        yield SseEvent(event=event or "message", data=payload, id=sse.id)
