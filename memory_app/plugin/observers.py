"""Capture observers: a higher app hears of each operational-memory capture after commit.

``register_capture_observer(fn)`` lets sessions_app ("every capture appears as a system event in the
session stream") receive ``fn(scope, record)`` without memory_app importing it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction

from tess_site.scope import Scope

from .contract import MemoryRecord

logger = logging.getLogger(__name__)

CaptureObserver = Callable[[Scope, MemoryRecord], None]

_observers: list[CaptureObserver] = []


def register_capture_observer(observer: CaptureObserver) -> None:
    if observer not in _observers:
        _observers.append(observer)


def unregister_capture_observer(observer: CaptureObserver) -> None:
    if observer in _observers:
        _observers.remove(observer)


def notify_capture_on_commit(scope: Scope, record: MemoryRecord) -> None:
    """Tell every observer of ``record`` once the current transaction commits (at once outside one)."""

    def notify() -> None:
        for observer in list(_observers):
            try:
                observer(scope, record)
            except Exception:
                # An observer's failure must not undo or fail a capture that already committed.
                logger.exception("capture observer %r failed", observer)

    transaction.on_commit(notify)
