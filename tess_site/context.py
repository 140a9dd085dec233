"""The correlation id of the request, websocket message or task being handled, for logs and audit."""

from __future__ import annotations

import re
import uuid
from contextvars import ContextVar

_correlation_id: ContextVar[str] = ContextVar("tess_correlation_id", default="-")

# A caller may name its own correlation id so its logs and ours line up; anything else is replaced.
_VALID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{7,127}$")


def new_correlation_id() -> str:
    return uuid.uuid4().hex


def accept_correlation_id(raw: str | None) -> str:
    """Return ``raw`` if it is a well-formed correlation id, otherwise a fresh one."""
    if raw and _VALID.match(raw):
        return raw
    return new_correlation_id()


def get_correlation_id() -> str:
    return _correlation_id.get()


def set_correlation_id(value: str) -> object:
    """Bind ``value`` for the current context; returns a token for :func:`reset_correlation_id`."""
    return _correlation_id.set(value)


def reset_correlation_id(token: object) -> None:
    _correlation_id.reset(token)  # type: ignore[arg-type]


def clear_correlation_id(**kwargs: object) -> None:
    """Receiver of ``request_finished``: nothing after a request inherits its id."""
    _correlation_id.set("-")
