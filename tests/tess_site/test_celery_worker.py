"""A real Celery worker, in a child process, against the real Redis broker and the shared test database.

The worker consumes a queue of its own, so other runs on the same Redis never take its tasks; the test
process sends to that queue and turns eager execution off only for these tests.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tess_site.celery import app
from tess_site.context import reset_correlation_id, set_correlation_id
from tess_site.leases import LeaseState, claim, new_worker_id
from tess_site.tasks import enqueue_on_commit, sweep_expired_leases
from tests.testapp.models import Chore
from tests.waiting import wait_for

from .children import VENV_BIN, Child, child_env, worker_answers

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

SWEEPER = "tess_site.tasks.sweep_expired_leases"
WORKER_START_SECONDS = 60
TASK_SECONDS = 20


class RolledBack(Exception):
    pass


@dataclass(frozen=True)
class Worker:
    child: Child
    queue: str
    node: str

    def processed(self, task_name: str) -> int:
        """How many ``task_name`` tasks this worker has started, by its own count."""
        stats = app.control.inspect(destination=[self.node], timeout=5).stats() or {}
        assert self.node in stats, f"the worker did not answer:\n{self.child.output()}"
        return int(stats[self.node].get("total", {}).get(task_name, 0))


def _forget_queue(queue: str) -> None:
    assert settings.REDIS_URL
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        # The queue's list and kombu's binding keys (whose naming differs between kombu versions).
        leftovers = [queue, *client.scan_iter(match=f"_kombu.binding*{queue}")]
        client.delete(*leftovers)
    finally:
        client.close()


@pytest.fixture(scope="module")
def worker(django_db_setup: None, start_child: Callable[..., Child]) -> Iterator[Worker]:
    name = f"tess-test-{uuid.uuid4().hex[:12]}"
    node = f"{name}@{socket.gethostname()}"
    child = start_child(
        "celery-worker",
        [
            str(VENV_BIN / "celery"),
            "-A",
            "tests.tess_site.worker_app",
            "worker",
            "--pool=solo",
            "--concurrency=1",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--queues",
            name,
            "--hostname",
            node,
            "--loglevel=INFO",
        ],
        child_env(),
    )
    try:
        if not wait_for(
            lambda: not child.alive() or worker_answers(app, node), timeout=WORKER_START_SECONDS, interval=0.5
        ):
            pytest.fail(f"the worker did not answer within {WORKER_START_SECONDS}s:\n{child.output()}")
        if not child.alive():
            pytest.fail(f"the worker exited:\n{child.output()}")
        yield Worker(child=child, queue=name, node=node)
    finally:
        child.stop()
        _forget_queue(name)


@pytest.fixture
def tasks_go_to_the_worker(worker: Worker) -> Iterator[None]:
    """Send tasks to the worker's queue instead of running them here (the test settings run them eagerly)."""
    eager, queue = app.conf.task_always_eager, app.conf.task_default_queue
    app.conf.task_always_eager = False
    app.conf.task_default_queue = worker.queue
    try:
        yield
    finally:
        app.conf.task_always_eager = eager
        app.conf.task_default_queue = queue


def _expired_chore() -> Chore:
    chore = Chore.objects.create(label="abandoned")
    assert claim(Chore, pk=chore.pk, worker=new_worker_id()) is not None
    Chore.objects.filter(pk=chore.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    return chore


def _state(chore: Chore) -> str:
    return Chore.objects.values_list("state", flat=True).get(pk=chore.pk)


def test_the_running_worker_has_the_same_delivery_settings(worker):
    conf = (app.control.inspect(destination=[worker.node], timeout=5).conf() or {}).get(worker.node)
    assert conf is not None, worker.child.output()
    # The worker reads them from Django settings, under the CELERY_ namespace.
    assert conf["CELERY_TASK_ACKS_LATE"] is True
    assert conf["CELERY_TASK_REJECT_ON_WORKER_LOST"] is True
    assert conf["CELERY_TASK_SERIALIZER"] == "json"
    assert list(conf["CELERY_ACCEPT_CONTENT"]) == ["json"]
    assert conf["CELERY_WORKER_PREFETCH_MULTIPLIER"] == 1


def test_health_reports_celery_ok_with_a_running_worker(worker, tasks_go_to_the_worker, cast, api_as):
    response = api_as(cast.owner).get("/api/v1/health/")
    celery = response.json()["checks"]["celery"]
    assert celery["ok"] is True, celery
    assert celery["mode"] == "workers"
    assert celery["workers"] >= 1
    assert response.status_code == 200, response.json()


def test_a_task_queued_in_a_rolled_back_transaction_never_runs_and_one_committed_does(worker, tasks_go_to_the_worker):
    chore = _expired_chore()
    started = worker.processed(SWEEPER)

    with pytest.raises(RolledBack), transaction.atomic():
        enqueue_on_commit(sweep_expired_leases)
        raise RolledBack
    time.sleep(1.5)  # long enough for an idle worker to have taken a task that had been sent
    assert _state(chore) == LeaseState.LEASED
    assert worker.processed(SWEEPER) == started

    with transaction.atomic():
        enqueue_on_commit(sweep_expired_leases)
        assert worker.processed(SWEEPER) == started  # not before the commit either
    assert wait_for(lambda: _state(chore) == LeaseState.PENDING, timeout=TASK_SECONDS), worker.child.output()
    # One queue, one solo worker: a task sent by the rolled-back transaction would have run first.
    assert worker.processed(SWEEPER) == started + 1


def test_a_worker_task_runs_under_the_correlation_id_it_was_queued_with(worker, tasks_go_to_the_worker):
    chore = _expired_chore()
    correlation_id = f"corr-{uuid.uuid4().hex}"
    token = set_correlation_id(correlation_id)
    try:
        with transaction.atomic():
            enqueue_on_commit(sweep_expired_leases)
    finally:
        reset_correlation_id(token)
    assert wait_for(lambda: _state(chore) == LeaseState.PENDING, timeout=TASK_SECONDS), worker.child.output()
    # The sweeper logs a warning for what it re-queued; the worker prints it with the request's id.
    line = f"[{correlation_id}] re-queued 1 expired testapp.Chore leases"
    assert wait_for(lambda: line in worker.child.wrote(), timeout=5), worker.child.output()
