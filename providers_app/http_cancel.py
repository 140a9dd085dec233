"""Ending a model's HTTP call from another thread, when its turn is stopped.

A thread blocked reading a socket is not woken by closing that socket elsewhere (the read keeps the file
open, so not even the peer learns of it); shutting the socket down is what ends the read at once and tells
the peer the connection is closed. The HTTP client (httpx2, ``chat_completions``) hides its sockets, so its
transport is given a network backend whose streams note, on each read or write, which call (``CallHandle``,
per thread) is using them: a call waiting for the model's first byte on a kept-alive connection is found
as surely as one mid-stream.

``cancel`` is a ``CancelEvent``: a ``threading.Event`` that also calls back whoever asked when it is set.
``cancellable_call(cancel)`` asks it to shut the call's connection down, so the blocked read ends at once with
an end of stream or a connection error, which the adapter reports as ``ModelStopped``. No thread watches a
waiting call (32 turns waiting on a slow model would otherwise wake 32 watchers many times a second).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import httpcore2
import httpx2

_current = threading.local()


class CancelEvent(threading.Event):
    """An event that, once set, also runs the callbacks given to ``when_set`` (in the thread that sets it)."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], None]] = []
        self._callbacks_lock = threading.Lock()

    def set(self) -> None:
        super().set()
        with self._callbacks_lock:
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def when_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` once the event is set (now, if it is); returns what forgets it, if it has not run."""
        with self._callbacks_lock:
            if not self.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._callbacks_lock, suppress(ValueError):
            self._callbacks.remove(callback)


class CallHandle:
    """One HTTP call that may be cancelled: the connection it uses, and whether it was cancelled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stream: httpcore2.NetworkStream | None = None
        self.cancelled = False
        self.over = False

    def attach(self, stream: httpcore2.NetworkStream) -> None:
        with self._lock:
            self._stream = stream
            if self.cancelled:
                _shut(stream)

    def cancel(self) -> None:
        with self._lock:
            if self.over:  # the call ended first: its connection may already serve another call
                return
            self.cancelled = True
            if self._stream is not None:
                _shut(self._stream)

    def end(self) -> None:
        with self._lock:
            self.over = True


def _shut(stream: httpcore2.NetworkStream) -> None:
    sock = stream.get_extra_info("socket")
    if isinstance(sock, socket.socket):
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class _WatchedStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def _note(self) -> None:
        handle = getattr(_current, "handle", None)
        if handle is not None:
            handle.attach(self._inner)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._note()
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._note()
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        return _WatchedStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _WatchingBackend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        return _WatchedStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        return _WatchedStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def cancellable_transport(**kwargs: Any) -> httpx2.BaseTransport:
    """httpx2's own transport, its connection pool given the watching network backend (it takes no backend
    as an argument, so the pool's is wrapped in place; ``tests/providers_app`` fails if that ever stops
    closing a stopped call)."""
    transport = httpx2.HTTPTransport(**kwargs)
    pool = transport._pool
    pool._network_backend = _WatchingBackend(pool._network_backend)
    return transport


@contextmanager
def cancellable_call(cancel: CancelEvent | None) -> Iterator[CallHandle]:
    """Run an HTTP call in the ``with`` block (in this thread) that ``cancel`` ends: its connection is shut down
    as ``cancel`` is set. ``handle.cancelled`` says whether it was."""
    handle = CallHandle()
    if cancel is None:
        yield handle
        return
    previous = getattr(_current, "handle", None)
    _current.handle = handle
    forget = cancel.when_set(handle.cancel)
    try:
        yield handle
    finally:
        handle.end()
        forget()
        _current.handle = previous
