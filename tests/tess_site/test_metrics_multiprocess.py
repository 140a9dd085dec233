"""Metrics across processes (``PROMETHEUS_MULTIPROC_DIR``): a scrape of the ASGI server adds up every process.

Real processes: a Celery worker and daphne in child processes sharing one metrics directory, and short-lived
Python processes that count something and exit.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from websockets.sync.client import connect

from tess_site.celery import app
from tests.tess_site.children import (
    ROOT,
    VENV_BIN,
    Child,
    child_env,
    free_port,
    serves_healthz,
    worker_answers,
)
from tests.waiting import wait_for

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
SWEEPER = "tess_site.tasks.sweep_expired_leases"


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


COUNT_AND_EXIT = """
from tess_site.metrics import CELERY_TASKS, WEBSOCKET_OPEN
CELERY_TASKS.labels(task="elsewhere", state="succeeded").inc(3)
WEBSOCKET_OPEN.labels(consumer="Elsewhere").inc()
"""
COUNT_AND_WAIT = COUNT_AND_EXIT + "\nimport sys; sys.stdin.read()\n"


@pytest.fixture
def metrics_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "metrics"
    path.mkdir()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(path))
    return path


def _python(code: str, metrics_dir: Path, **kwargs: Any) -> subprocess.Popen[str]:
    env = {"PATH": "/usr/bin:/bin", "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, text=True, **kwargs)


@pytest.mark.django_db
def test_counts_of_an_exited_process_stay_and_its_open_websockets_do_not(metrics_dir):
    assert _python(COUNT_AND_EXIT, metrics_dir).wait(timeout=60) == 0
    alive = _python(COUNT_AND_WAIT, metrics_dir, stdin=subprocess.PIPE)
    try:
        assert wait_for(lambda: len(list(metrics_dir.glob("gauge_livesum_*.db"))) == 2, timeout=30)
        samples = parse(Client().get("/metrics").content.decode())
        # Both processes counted 3; only the one still running has a socket open.
        assert value(samples, "tess_celery_tasks_total", task="elsewhere", state="succeeded") == 6
        assert value(samples, "tess_websocket_open", consumer="Elsewhere") == 1
    finally:
        assert alive.stdin is not None
        alive.stdin.close()
        alive.wait(timeout=30)
    samples = parse(Client().get("/metrics").content.decode())
    assert value(samples, "tess_celery_tasks_total", task="elsewhere", state="succeeded") == 6
    assert value(samples, "tess_websocket_open", consumer="Elsewhere") in (None, 0)


# --- a real worker and a real server ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    server: str
    queue: str
    worker: Child
    daphne: Child


@pytest.fixture(scope="module")
def cluster(
    django_db_setup: None, start_child: Callable[..., Child], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    assert settings.REDIS_URL, "the tests using this fixture are marked redis"
    shared = str(tmp_path_factory.mktemp("multiproc"))
    queue = f"tess-metrics-{uuid.uuid4().hex[:12]}"
    node = f"{queue}@{socket.gethostname()}"
    worker = start_child(
        "celery-worker",
        [
            str(VENV_BIN / "celery"),
            "-A",
            "tests.tess_site.worker_app",
            "worker",
            "--pool=solo",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--queues",
            queue,
            "--hostname",
            node,
        ],
        child_env(PROMETHEUS_MULTIPROC_DIR=shared),
    )
    port = free_port()
    daphne = start_child(
        "daphne",
        [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"],
        child_env(PROMETHEUS_MULTIPROC_DIR=shared),
    )
    try:
        if not wait_for(lambda: not worker.alive() or worker_answers(app, node), timeout=60, interval=0.5):
            pytest.fail(f"the worker did not answer:\n{worker.output()}")
        if not wait_for(lambda: not daphne.alive() or serves_healthz(port), timeout=30):
            pytest.fail(f"daphne did not answer:\n{daphne.output()}")
        yield Cluster(server=f"127.0.0.1:{port}", queue=queue, worker=worker, daphne=daphne)
    finally:
        client = redis.Redis.from_url(settings.REDIS_URL)
        try:
            client.delete(queue, *client.scan_iter(match=f"_kombu.binding*{queue}"))
        finally:
            client.close()


def _scrape(server: str) -> Samples:
    host, port = server.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200
        return parse(response.read().decode())
    finally:
        conn.close()


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_the_servers_scrape_includes_the_tasks_the_worker_ran(cluster):
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = False  # the test settings run tasks here; this one goes to the worker
    try:
        app.send_task(SWEEPER, queue=cluster.queue)
    finally:
        app.conf.task_always_eager = eager

    def succeeded() -> float | None:
        return value(_scrape(cluster.server), "tess_celery_tasks_total", task=SWEEPER, state="succeeded")

    assert wait_for(lambda: succeeded() == 1, timeout=30), cluster.worker.output()
    samples = _scrape(cluster.server)
    assert value(samples, "tess_celery_task_duration_seconds_count", task=SWEEPER) == 1
    # The server's own requests are in the same scrape.
    assert (value(samples, "tess_http_requests_total", method="GET", route="metrics", status="2xx") or 0) >= 1


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_the_servers_scrape_shows_its_open_websockets(cluster, cast, token_for):
    headers = {"Authorization": f"Bearer {token_for(cast.owner)}"}
    with connect(f"ws://{cluster.server}/ws/me/", additional_headers=headers, open_timeout=10, proxy=None) as ws:
        assert json.loads(ws.recv(timeout=10))["kind"] == "hello"
        assert value(_scrape(cluster.server), "tess_websocket_open", consumer="MeConsumer") == 1

    def closed() -> bool:
        return value(_scrape(cluster.server), "tess_websocket_open", consumer="MeConsumer") == 0

    assert wait_for(closed, timeout=10), cluster.daphne.output()
    assert value(_scrape(cluster.server), "tess_websocket_disconnects_total", consumer="MeConsumer") == 1
