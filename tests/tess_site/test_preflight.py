"""``manage.py tess_preflight``: what the units run before starting; names each dependency that does not answer."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.db import connection

from tests.tess_site.children import ROOT, child_env, free_port

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _preflight(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "tess_preflight"],
        cwd=ROOT,
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _lines(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """``{dependency: "ok" | "MISSING"}`` from the command's report."""
    return {line.split()[1].rstrip(":"): line.split()[0] for line in result.stdout.splitlines() if line.strip()}


@pytest.mark.redis
def test_it_passes_when_everything_answers(tmp_path):
    result = _preflight(PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert _lines(result) == {"database": "ok", "migrations": "ok", "pool": "ok", "redis": "ok", "metrics": "ok"}


def test_it_names_an_unreachable_database_and_redis_without_printing_their_passwords():
    dead = free_port()
    result = _preflight(
        DATABASE_URL=f"postgres://tess:hunter2-db@127.0.0.1:{dead}/tess",
        REDIS_URL=f"redis://:hunter2-redis@127.0.0.1:{dead}/0",
    )
    assert result.returncode == 1
    assert _lines(result) == {
        "database": "MISSING",
        "migrations": "MISSING",
        "pool": "MISSING",
        "redis": "MISSING",
        "metrics": "ok",
    }
    assert "Tess cannot start; missing: database, migrations, pool, redis" in result.stderr
    assert "hunter2" not in result.stdout + result.stderr


def test_with_a_pool_an_unreachable_database_is_named_with_its_own_error_not_the_pools_wait():
    dead = free_port()
    result = _preflight(TESS_DB_POOL="1", DATABASE_URL=f"postgres://tess:hunter2-db@127.0.0.1:{dead}/tess")
    assert result.returncode == 1
    assert _lines(result)["database"] == "MISSING" and "PoolTimeout" not in result.stdout
    assert "OperationalError" in result.stdout, result.stdout


def test_it_describes_the_pool_and_refuses_one_larger_than_postgresql_accepts():
    result = _preflight(TESS_DB_POOL="1", TESS_DB_POOL_MIN="1", TESS_DB_POOL_MAX="3")
    assert _lines(result)["pool"] == "ok", result.stdout + result.stderr
    assert "pool: 1-3 connections per serving process, 10 s wait" in result.stdout
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_connections")
        too_many = int(cursor.fetchone()[0]) + 1
    result = _preflight(TESS_DB_POOL="1", TESS_DB_POOL_MAX=str(too_many))
    assert result.returncode == 1
    assert _lines(result)["pool"] == "MISSING"
    assert f"TESS_DB_POOL_MAX={too_many} is more than the" in result.stdout


def test_a_metrics_directory_it_cannot_write_stops_it_with_the_variable_named(tmp_path):
    result = _preflight(PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "absent"))
    assert result.returncode != 0
    assert f"PROMETHEUS_MULTIPROC_DIR={str(tmp_path / 'absent')!r} is not a directory this process can write" in (
        result.stderr
    )


@pytest.fixture
def empty_database() -> Iterator[str]:
    """A database on the test server that is reachable but not migrated.

    The server's own ``postgres`` database is one, unless someone migrated Tess into it; only then is a new one
    made. Dropping a database makes PostgreSQL write a checkpoint, which took up to 40 s under the parallel suite.
    """
    import psycopg

    url = urlsplit(child_env()["DATABASE_URL"])
    maintenance = urlunsplit(url._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as probe:
        migrated = probe.execute("SELECT to_regclass('django_migrations') IS NOT NULL").fetchone()
    if migrated == (False,):
        yield maintenance
        return
    name = f"tess_preflight_{os.getpid()}"
    with connection.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        cursor.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(url._replace(path=f"/{name}"))
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_it_names_a_database_that_is_not_migrated(empty_database):
    result = _preflight(DATABASE_URL=empty_database)
    assert result.returncode == 1
    assert _lines(result)["database"] == "ok"
    assert _lines(result)["migrations"] == "MISSING"
    assert "migrations not applied; run `manage.py migrate` first" in result.stdout
