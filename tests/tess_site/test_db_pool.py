"""The serving processes keep their PostgreSQL connections in a pool: over real HTTP against the production
tier (nginx, gunicorn, daphne), many requests use no more backends than the pools hold, and a backend killed
under them is replaced before a request uses it, without an error reaching the client.

Backends are counted in ``pg_stat_activity`` for the test database (this process's own excluded), sampled
while the requests run: without a pool every request opens and closes a backend of its own.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connection

from tests.tess_site.children import Child
from tests.tess_site.production import HOST, ProductionWeb, start_production_web
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

POOL_MAX = 2
# gunicorn with one worker process, and daphne: a pool each.
POOLS: dict[str, Any] = {
    "TESS_WEB_WORKERS": "1",
    "TESS_WEB_THREADS": "4",
    "TESS_DB_POOL_MIN": "1",
    "TESS_DB_POOL_MAX": str(POOL_MAX),
}
BACKENDS_AT_MOST = 2 * POOL_MAX
REQUESTS = 60


def _backends() -> set[tuple[int, str]]:
    """The client backends on the test database now, as (pid, start time), this test's own left out."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, backend_start::text FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return {(int(pid), str(start)) for pid, start in cursor.fetchall()}


def _get(port: int, path: str, token: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Host": HOST, "Authorization": f"Bearer {token}"}
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


class _Sampler:
    """Every backend seen while it runs (sampled as fast as the database answers), and the most at once."""

    def __init__(self) -> None:
        self.seen: set[tuple[int, str]] = set()
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                now = _backends()
                self.seen |= now
                self.most = max(self.most, len(now))
        finally:
            connection.close()  # this thread's own connection

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


@pytest.fixture
def tier(tmp_path, start_child: Callable[..., Child]) -> Iterator[ProductionWeb]:
    yield start_production_web(start_child, tmp_path / "web", **POOLS)


def _burst(web: ProductionWeb, token: str, paths: list[str]) -> list[int]:
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda path: _get(web.port, path, token), paths))


def test_many_requests_use_no_more_backends_than_the_pools_hold(tier, cast, token_for):
    token = token_for(cast.owner)
    paths = ["/api/v1/sessions/", "/api/v1/me/", "/healthz"] * (REQUESTS // 3)
    with _Sampler() as sampler:
        statuses = _burst(tier, token, paths)
    assert statuses == [200] * len(paths)
    assert sampler.most <= BACKENDS_AT_MOST, sampler.most
    # Not one backend opened per request: the same few served them all.
    assert len(sampler.seen) <= BACKENDS_AT_MOST, sorted(sampler.seen)


def test_a_backend_killed_under_the_pool_is_replaced_without_an_error_reaching_a_client(tier, cast, token_for):
    token = token_for(cast.owner)
    assert _burst(tier, token, ["/api/v1/sessions/"] * 8) == [200] * 8  # the pools hold open connections now
    before = _backends()
    assert before
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [[pid for pid, _ in before]])
    assert wait_for(lambda: not (_backends() & before), timeout=10)
    # Each checkout checks its connection first (ConnectionPool.check_connection): a dead one is discarded.
    statuses = [_get(tier.port, path, token) for path in ["/api/v1/sessions/", "/api/v1/me/", "/healthz"] * 4]
    assert statuses == [200] * 12
    lines = tier.log_lines()
    assert not [line for line in lines if "OperationalError" in line or "Internal Server Error" in line], lines[-20:]
