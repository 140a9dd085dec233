"""The one way tests wait for something another process or thread does: poll, never sleep a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

WAIT_SECONDS = 15.0


@overload
def wait_for(check: Callable[[], T | None], what: str, *, timeout: float = ..., interval: float = ...) -> T: ...
@overload
def wait_for(check: Callable[[], T], what: None = None, *, timeout: float = ..., interval: float = ...) -> T: ...


def wait_for(
    check: Callable[[], Any], what: str | None = None, *, timeout: float = WAIT_SECONDS, interval: float = 0.1
) -> Any:
    """Poll ``check`` until it returns something truthy, and return that.

    After ``timeout`` seconds: with ``what``, fail naming it; without, return ``check``'s last (falsy) answer
    for the caller to assert on with its own message (a child's output, say).
    """
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            if what is not None:
                raise AssertionError(f"gave up waiting for {what} after {timeout} seconds")
            return result
        time.sleep(interval)
