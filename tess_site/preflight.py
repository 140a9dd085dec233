"""Start-up preflight: can this process reach what it depends on? (``manage.py tess_preflight``)

Settings already refuse a missing *configuration* (tess_site/settings/prod.py); this checks that what is
configured *answers*: the database (and that its schema is migrated), Redis, and the shared metrics
directory. The systemd units run it as ``ExecStartPre``, so a unit that cannot work fails at start with a
line naming what is missing instead of crash-looping later. Messages never carry a URL's password.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from .health import CHECK_TIMEOUT_SECONDS, check_redis
from .logging import redact
from .metrics import multiprocess_dir


@dataclass(frozen=True)
class Outcome:
    name: str
    ok: bool
    detail: str


def _reason(exc: BaseException) -> str:
    first_line = (str(exc).strip().splitlines() or [""])[0][:300]
    return redact(f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__)


def check_database() -> str:
    if connection.vendor == "postgresql":
        # Without it an unroutable host waits for the kernel's TCP timeout, minutes.
        connection.settings_dict.setdefault("OPTIONS", {}).setdefault("connect_timeout", int(CHECK_TIMEOUT_SECONDS) + 3)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return connection.vendor


def check_migrations() -> str:
    executor = MigrationExecutor(connection)
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if pending:
        raise RuntimeError(f"{len(pending)} migrations not applied; run `manage.py migrate` first")
    return "up to date"


def check_redis_answers() -> str:
    if not settings.REDIS_URL:
        return "not configured (embedded: in-process channel layer, tasks in-process)"
    check_redis()
    return "answers"


def check_metrics_dir() -> str:
    path = multiprocess_dir()
    if path is None:
        return "in-process (PROMETHEUS_MULTIPROC_DIR unset)"
    if not os.path.isdir(path) or not os.access(path, os.W_OK | os.X_OK):
        raise RuntimeError("PROMETHEUS_MULTIPROC_DIR is not a directory this process can write")
    return "multiprocess"


CHECKS: list[tuple[str, Callable[[], str]]] = [
    ("database", check_database),
    ("migrations", check_migrations),
    ("redis", check_redis_answers),
    ("metrics", check_metrics_dir),
]


def run_checks() -> list[Outcome]:
    outcomes = []
    database_ok = True
    for name, check in CHECKS:
        if name == "migrations" and not database_ok:
            outcomes.append(Outcome(name, False, "not checked: the database does not answer"))
            continue
        try:
            outcomes.append(Outcome(name, True, check()))
        except Exception as exc:
            outcomes.append(Outcome(name, False, _reason(exc)))
            if name == "database":
                database_ok = False
                connection.close()  # a half-open connection must not be reused by the next try
    return outcomes
