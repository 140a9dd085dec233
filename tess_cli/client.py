"""HTTP calls with the error handling every command shares, and the exit codes they map to."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx

from .config import Config

# Exit codes (documented in ``tess --help`` and the README).
OK = 0
ERROR = 1  # the server failed (5xx) or answered something unexpected
USAGE = 2  # bad command line
AUTH = 3  # not logged in, or the token was refused (401)
NOT_FOUND = 4  # no such object, or not yours (403/404)
REFUSED = 5  # the server refused the request (400/409/422/429), or an approval was denied/expired
NETWORK = 6  # the server could not be reached
INTERRUPTED = 130

EXIT_CODES = f"""exit codes:
  {OK}  success
  {ERROR}  server error or unexpected answer
  {USAGE}  usage error
  {AUTH}  not logged in or token refused (run `tess login`)
  {NOT_FOUND}  not found or not yours
  {REFUSED}  refused by the server (invalid, conflict, rate limited); approval denied or expired
  {NETWORK}  cannot reach the server
  {INTERRUPTED}  interrupted"""


class CliError(Exception):
    def __init__(self, message: str, code: int = ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _status_code(status: int) -> int:
    if status == 401:
        return AUTH
    if status in (403, 404):
        return NOT_FOUND
    if 400 <= status < 500:
        return REFUSED
    return ERROR


class Api:
    def __init__(
        self,
        config: Config,
        *,
        require_token: bool = True,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if require_token and not config.token:
            raise CliError("Not logged in: run `tess login` first.", AUTH)
        self.config = config
        headers = {"Accept": "application/json", "User-Agent": "tess-cli"}
        if config.token:
            headers["Authorization"] = f"Bearer {config.token}"
        self.http = httpx.Client(base_url=config.url.rstrip("/"), headers=headers, timeout=timeout, transport=transport)

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        idempotent: bool = False,
        retries: int = 0,
    ) -> httpx.Response:
        """One API call. With ``idempotent`` a generated ``Idempotency-Key`` makes retries after a network
        error safe: the server answers a repeated key with the first outcome."""
        headers = {"Idempotency-Key": uuid.uuid4().hex} if idempotent else {}
        attempt = 0
        while True:
            try:
                response = self.http.request(method, path, json=json, params=params, headers=headers)
                break
            except httpx.HTTPError as exc:
                if attempt >= retries:
                    raise CliError(f"Cannot reach {self.config.url}: {type(exc).__name__}.", NETWORK) from exc
                attempt += 1
                time.sleep(min(2**attempt * 0.25, 4))
        if response.status_code >= 400:
            raise CliError(_error_message(response), _status_code(response.status_code))
        return response

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs).json()

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        """POSTs carry an Idempotency-Key (routes that take one require it; the others ignore it)."""
        kwargs.setdefault("idempotent", True)
        return self.request("POST", path, json=body if body is not None else {}, **kwargs).json()


def _error_message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    message = error.get("message") or response.reason_phrase or "request failed"
    code = error.get("code") or str(response.status_code)
    hint = " Run `tess login`." if response.status_code == 401 else ""
    return f"{message} ({code}, HTTP {response.status_code}).{hint}"
