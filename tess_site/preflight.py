"""Start-up preflight: can this process reach what it depends on? (``manage.py tess_preflight``)

Settings already refuse a missing *configuration* (tess_site/settings/prod.py); this checks that what is
configured *answers*: the database (and that its schema is migrated), the connection pool the serving
processes keep (PostgreSQL must accept as many connections as one process's pool may open), Redis, and the
shared metrics directory. The systemd units run it as ``ExecStartPre``, so a unit that cannot work fails at start with a
line naming what is missing instead of crash-looping later. Messages never carry a URL's password.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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


def _take_pool_options() -> dict[str, Any] | None:
    """The pool's options, taken out of this process's settings: the preflight connects once, directly, so a
    database that does not answer is named with its own error, not with the pool's wait running out."""
    options = connection.settings_dict.get("OPTIONS", {})
    if "pool" in options:
        connection.close()
        _pool_seen.append(options.pop("pool"))
    return _pool_seen[-1] if _pool_seen else None


_pool_seen: list[dict[str, Any]] = []


def check_pool() -> str:
    pool = _take_pool_options()
    if connection.vendor != "postgresql":
        return f"none ({connection.vendor})"
    if not pool:
        return "none (TESS_DB_POOL=0: a connection per thread, kept DB_CONN_MAX_AGE seconds)"
    try:
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise RuntimeError("psycopg_pool is not installed (requirements.txt: psycopg-pool)") from None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int"
        )
        accepted = int(cursor.fetchone()[0])
    if pool["max_size"] > accepted:
        raise RuntimeError(
            f"TESS_DB_POOL_MAX={pool['max_size']} is more than the {accepted} connections PostgreSQL accepts"
            " (max_connections less the reserved ones)"
        )
    return (
        f"{pool['min_size']}-{pool['max_size']} connections per serving process, {pool['timeout']} s wait"
        f" (PostgreSQL accepts {accepted})"
    )


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
    ("pool", check_pool),
    ("redis", check_redis_answers),
    ("metrics", check_metrics_dir),
]


def run_checks() -> list[Outcome]:
    _take_pool_options()
    outcomes = []
    database_ok = True
    for name, check in CHECKS:
        if name in ("migrations", "pool") and not database_ok:
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
