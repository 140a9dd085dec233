"""A test guard: no network call and no subprocess while a database transaction is open.

A request that waits on a model, a provider or another service inside a transaction holds its locks and
its database connection for as long as that service takes. ``no_call_in_transaction()`` records every
such start while it is active and fails the test at its end:

- a socket ``connect`` to anything but the database and Redis (any HTTP client, sync or async, ends there);
- a request sent through httpx or urllib3 (requests sends through urllib3), so a kept-alive connection
  that connects nothing is caught too;
- a ``subprocess.Popen`` (``run``, ``check_output``, asyncio's and anyio's child processes: tmux, MCP).

"Open" means a transaction of the code under test in the calling thread: the atomic blocks a
``pytest.mark.django_db`` test wraps itself in do not count. Work handed to a ``ThreadPoolExecutor`` (MCP
discovery runs its event loop in one) counts as being in the submitting thread's transaction.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import urllib3
from django.conf import settings
from django.db import connections

_local = threading.local()


def in_transaction() -> bool:
    """Whether code under test holds a transaction open in this thread (or the thread that submitted it)."""
    if getattr(_local, "inherited", False):
        return True
    connection = connections["default"]
    return any(not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks)


def _allowed_addresses() -> set[Any]:
    """The database's and Redis's addresses: connecting to them inside a transaction is what transactions do."""
    allowed: set[Any] = set()
    database = settings.DATABASES["default"]
    if database.get("HOST"):
        allowed.add((str(database["HOST"]), int(database.get("PORT") or 5432)))
    redis = urlsplit(str(getattr(settings, "REDIS_URL", "") or ""))
    if redis.hostname:
        allowed.add((redis.hostname, redis.port or 6379))
    for host, port in list(allowed):
        if host == "localhost":
            allowed.add(("127.0.0.1", port))
    return allowed


class Guard:
    def __init__(self) -> None:
        self.violations: list[str] = []
        self._allowed = _allowed_addresses()

    def check(self, what: str) -> None:
        if in_transaction():
            stack = "".join(traceback.format_stack(limit=12)[:-2])
            self.violations.append(f"{what} inside a transaction:\n{stack}")

    def connecting(self, address: Any) -> None:
        if isinstance(address, tuple) and (str(address[0]), int(address[1])) in self._allowed:
            return
        self.check(f"socket connect to {address!r}")


@contextmanager
def no_call_in_transaction() -> Iterator[Guard]:
    """Record network calls and subprocesses started inside a transaction; fail at the end if there were any."""
    guard = Guard()
    with pytest.MonkeyPatch.context() as patch:
        connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

        def guarded_connect(sock: socket.socket, address: Any) -> Any:
            guard.connecting(address)
            return connect(sock, address)

        def guarded_connect_ex(sock: socket.socket, address: Any) -> Any:
            guard.connecting(address)
            return connect_ex(sock, address)

        patch.setattr(socket.socket, "connect", guarded_connect)
        patch.setattr(socket.socket, "connect_ex", guarded_connect_ex)

        popen_init = subprocess.Popen.__init__

        def guarded_popen(process: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
            guard.check(f"subprocess {args!r}")
            popen_init(process, args, *rest, **kwargs)

        patch.setattr(subprocess.Popen, "__init__", guarded_popen)

        client_send, async_send = httpx.Client.send, httpx.AsyncClient.send

        def guarded_send(client: httpx.Client, request: httpx.Request, **kwargs: Any) -> httpx.Response:
            guard.check(f"httpx {request.method} {request.url}")
            return client_send(client, request, **kwargs)

        async def guarded_async_send(client: httpx.AsyncClient, request: httpx.Request, **kwargs: Any) -> Any:
            guard.check(f"httpx {request.method} {request.url}")
            return await async_send(client, request, **kwargs)

        patch.setattr(httpx.Client, "send", guarded_send)
        patch.setattr(httpx.AsyncClient, "send", guarded_async_send)

        urlopen = urllib3.HTTPConnectionPool.urlopen

        def guarded_urlopen(pool: urllib3.HTTPConnectionPool, method: str, url: str, *rest: Any, **kwargs: Any) -> Any:
            guard.check(f"urllib3 {method} {pool.host}:{pool.port}{url}")
            return urlopen(pool, method, url, *rest, **kwargs)

        patch.setattr(urllib3.HTTPConnectionPool, "urlopen", guarded_urlopen)

        submit = ThreadPoolExecutor.submit

        def guarded_submit(executor: ThreadPoolExecutor, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            inherited = in_transaction()

            def run(*call_args: Any, **call_kwargs: Any) -> Any:
                _local.inherited = inherited
                try:
                    return fn(*call_args, **call_kwargs)
                finally:
                    _local.inherited = False

            return submit(executor, run, *args, **kwargs)

        patch.setattr(ThreadPoolExecutor, "submit", guarded_submit)
        yield guard
    if guard.violations:
        pytest.fail("\n\n".join(guard.violations), pytrace=False)


@pytest.fixture
def outside_transaction() -> Iterator[Guard]:
    """The guard for a whole test (see the module docstring)."""
    with no_call_in_transaction() as guard:
        yield guard
