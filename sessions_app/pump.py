"""The embedded pump: without Redis (``make run``), a thread of the serving process does what Celery
beat and workers do with Redis — pump output of running sessions, sweep expired leases, wake due items,
purge old idempotency keys and check every runtime provider's heartbeat — so one process streams live
output and acts on a provider that stopped answering.

Started only when serving (``runserver``/daphne), never in tests or management commands. Importing this
module (the app's start-up does) also registers the app's tasks with Celery, which eager runs need.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
from dataclasses import dataclass

from django.apps import apps
from django.conf import settings
from django.db import DatabaseError, close_old_connections

from approvals_app.approvals import approvals_expire_lapsed
from memory_app.coding.tasks import requeue_due_coding_exports
from providers_app.contract import ProviderError
from providers_app.health import heartbeats_check
from tess_site.tasks import sweep_expired_leases

from . import services, tasks

logger = logging.getLogger(__name__)

_started = False
_lock = threading.Lock()
_stop = threading.Event()

SERVING_COMMANDS = {"runserver", "daphne", "uvicorn"}
HOUSEKEEPING_SECONDS = 15.0


def is_serving(argv: list[str] | None = None) -> bool:
    """True in a process that serves requests (not the autoreloader's parent, not tests or commands)."""
    args = argv if argv is not None else sys.argv
    program = os.path.basename(args[0]) if args else ""
    if program in ("daphne", "uvicorn"):
        return True
    if "runserver" in args[1:2]:
        # With the autoreloader, the serving child has RUN_MAIN=true; the watching parent must not pump.
        return os.environ.get("RUN_MAIN") == "true" or "--noreload" in args
    return False


def should_start() -> bool:
    return not settings.REDIS_URL and settings.TESS_EMBEDDED_PUMP and is_serving()


def start_embedded_pump() -> bool:
    """Start the pump thread once per process. Returns True if this call started it."""
    global _started
    with _lock:
        if _started:
            return False
        _started = True
    threading.Thread(target=_run, name="tess-embedded-pump", daemon=True).start()
    logger.info("embedded pump started (every %d ms)", settings.TESS_PUMP_INTERVAL_MS)
    return True


def pump_once() -> int:
    """One pass over the running sessions. A session that fails (its provider, or the database: a deadlock
    with a truncating test, a dropped connection) is logged and tried again next pass; it never keeps the
    sessions after it from being pumped."""
    written = 0
    for session_id in services.running_session_ids():
        try:
            written += services.session_pump(session_id=session_id)
        except ProviderError as exc:
            logger.warning("pumping %s failed: %s", session_id, exc.code)
        except DatabaseError:
            logger.exception("pumping %s failed in the database; it is tried again next pass", session_id)
            close_old_connections()
    return written


def housekeeping() -> None:
    """The periodic tasks Celery beat runs with Redis, run in this thread."""
    sweep_expired_leases()
    tasks.requeue_due_work()
    approvals_expire_lapsed()
    tasks.purge_idempotency_records()
    requeue_due_coding_exports()  # plast-mem ingestion's retries and lost wake-ups, outside any request


@dataclass
class Cycle:
    """One look of the pump thread: heartbeats when due, output always, housekeeping when due."""

    last_heartbeat: float = -math.inf
    last_housekeeping: float = -math.inf

    def run(self) -> None:
        if time.monotonic() - self.last_heartbeat >= settings.TESS_PROVIDER_HEARTBEAT_SECONDS:
            # Beat's check_provider_heartbeats on the same interval, before the pump that acts on its result.
            self.last_heartbeat = time.monotonic()
            heartbeats_check()
        pump_once()
        if time.monotonic() - self.last_housekeeping > HOUSEKEEPING_SECONDS:
            housekeeping()
            self.last_housekeeping = time.monotonic()


def _run() -> None:
    interval = settings.TESS_PUMP_INTERVAL_MS / 1000
    cycle = Cycle()
    while not apps.ready and not _stop.wait(0.05):
        pass  # started from an AppConfig.ready(): the database is the app registry's once every app is ready
    while not _stop.is_set():
        close_old_connections()
        try:
            cycle.run()
        except Exception:
            logger.exception("embedded pump cycle failed")
        _stop.wait(interval)
