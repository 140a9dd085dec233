"""Helpers for tests that run the real server or a real Celery worker in a child process.

A child process cannot see the test's open transaction, so those tests use
``django_db(transaction=True)`` and point the child at the same test database (``test_<name>``).
"""

from __future__ import annotations

import ctypes
import http.client
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent.parent
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def shared_database_url() -> str:
    """A ``DATABASE_URL`` naming the test database this process created (only PostgreSQL can be shared)."""
    db = connection.settings_dict
    assert db["ENGINE"].endswith("postgresql"), "a child process can only share a PostgreSQL test database"
    credentials = quote(db["USER"] or "", safe="")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = db["HOST"] or "127.0.0.1"
    port = db["PORT"] or "5432"
    return f"postgres://{credentials}@{host}:{port}/{quote(db['NAME'], safe='')}"


def child_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(
        DJANGO_SETTINGS_MODULE="tess_site.settings.test",
        DATABASE_URL=shared_database_url(),
        # No persistent connections: the test database is dropped at the end of the run.
        DB_CONN_MAX_AGE="0",
        PYTHONUNBUFFERED="1",
    )
    if settings.REDIS_URL:
        env["REDIS_URL"] = settings.REDIS_URL
        # The same channel layer as this process (each parallel test worker has its own prefix).
        env["TESS_CHANNEL_PREFIX"] = settings.TESS_CHANNEL_PREFIX
    else:
        env.pop("REDIS_URL", None)
    env.update(extra)
    return env


def serves_healthz(port: int, *, timeout: float = 1.0) -> bool:
    """A child ASGI server on ``port`` answers ``GET /healthz`` with 200."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def worker_answers(app: Any, node: str) -> bool:
    """A child Celery worker named ``node`` answers a control ping."""
    return any(node in reply for reply in app.control.ping(destination=[node], timeout=0.5) or [])


def _die_with_the_parent() -> None:
    """Linux: the child gets SIGTERM if the test process dies without tearing down (killed, crashed)."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)


class Child:
    """A child process whose output goes to a file (a full pipe would block it) and which always dies."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_the_parent,
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        """The end of what the child wrote (for a failure's message)."""
        return self.wrote()[-4000:]

    def wrote(self) -> str:
        """Everything the child wrote so far: what a readiness check searches, however much followed it."""
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()
