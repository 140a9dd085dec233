"""Fixtures of the cluster suite (``make test-cluster``): one two-node cluster for the whole run.

The standing cast and the harness's audit-aware flush come from the main suite's conftest. The cluster's
processes share the test database, so every test commits (``transaction=True``); the cluster itself is
session-scoped, and a test that kills one of its parts leaves it to ``cluster`` to bring back.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.db import connection

from tests.conftest import (  # noqa: F401  (fixtures shared with the main suite)
    _empty_cache,
    _flush_transactional_tests_by_delete,
    cast,
    token_for,
)

from .cluster import Cluster, make_cluster, remove_cluster


def _require_services() -> None:
    """PostgreSQL is required (the processes share its test database); never a silent skip under CI."""
    if connection.vendor != "postgresql":
        message = "THE CLUSTER SUITE NEEDS POSTGRESQL (DATABASE_URL)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def _cluster(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    _require_services()
    cluster = make_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        cluster.start()
        yield cluster
    except RuntimeError as exc:
        pytest.fail(f"{exc}\n{cluster.logs()}")
    finally:
        remove_cluster(cluster)


@pytest.fixture
def cluster(_cluster: Cluster) -> Iterator[Cluster]:
    """The running cluster, with both workers alive and Redis up whatever the previous test did."""
    if not _cluster.redis.child_alive():
        _cluster.redis.start()
    _cluster.revive()
    _cluster.hold.unlink(missing_ok=True)
    yield _cluster
    _cluster.hold.unlink(missing_ok=True)
