"""A Celery worker killed (SIGKILL) in the middle of a send: the sweeper's re-queue delivers the message
exactly once, through another worker, without waiting for the broker to redeliver anything.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sessions_app import services
from sessions_app.models import AttachMode, InboxItem
from tess_site.celery import app
from tess_site.leases import LeaseState
from tess_site.tasks import sweep_expired_leases
from tests.conftest import scope_of
from tests.tess_site.children import VENV_BIN, Child, child_env, worker_answers
from tests.waiting import wait_for

from .conftest import output_of, pump_until

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

LEASE_SECONDS = 5


@pytest.fixture
def queue() -> Iterator[str]:
    name = f"tess-test-{uuid.uuid4().hex[:12]}"
    eager, default_queue = app.conf.task_always_eager, app.conf.task_default_queue
    app.conf.task_always_eager = False
    app.conf.task_default_queue = name
    try:
        yield name
    finally:
        app.conf.task_always_eager = eager
        app.conf.task_default_queue = default_queue
        client = redis.Redis.from_url(str(settings.REDIS_URL))
        client.delete(name, f"_kombu.binding.{name}")
        client.close()


@pytest.fixture
def start_worker(start_child: Callable[..., Child], queue: str, tmux, tmp_path: Path) -> Callable[[str], Child]:
    def start(label: str) -> Child:
        node = f"{queue}-{label}@{socket.gethostname()}"
        env = child_env(
            TESS_RUNTIME_PROVIDERS=json.dumps(settings.TESS_RUNTIME_PROVIDERS),
            TESS_LEASE_SECONDS=str(LEASE_SECONDS),
            TESS_TEST_SEND_HOLD=str(tmp_path / "hold"),
        )
        child = start_child(
            f"worker-{label}",
            [
                str(VENV_BIN / "celery"),
                "-A",
                "tests.sessions_app.worker_app",
                "worker",
                "--pool=solo",
                "--concurrency=1",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--queues",
                queue,
                "--hostname",
                node,
                "--loglevel=INFO",
            ],
            env,
        )
        if not wait_for(lambda: not child.alive() or worker_answers(app, node), timeout=60, interval=0.5):
            pytest.fail(f"the worker did not answer:\n{child.output()}")
        assert child.alive(), child.output()
        return child

    return start


def test_a_message_whose_worker_was_killed_mid_send_is_delivered_once_by_the_sweepers_requeue(
    cast, start_session, start_worker, tmp_path
):
    session = start_session()
    scope = scope_of(cast.owner, cast.acme)
    services.session_attach(scope=scope, session_id=session.pk, mode=AttachMode.INTERACTIVE)
    hold = tmp_path / "hold"
    hold.touch()
    first = start_worker("first")

    with transaction.atomic():
        item = services.message_enqueue(scope=scope, session_id=session.pk, text="survives-sigkill")
    entered = Path(f"{hold}.entered")
    assert wait_for(entered.exists, timeout=30), first.output()
    item.refresh_from_db()
    assert item.state == LeaseState.LEASED

    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait(timeout=10)
    hold.unlink()
    services.session_pump(session_id=session.pk)
    assert "got:survives-sigkill" not in output_of(session)  # the killed worker typed nothing

    second = start_worker("second")
    # The lease runs out on its own (TESS_LEASE_SECONDS for the worker); then the sweeper hands the item on.
    assert wait_for(lambda: timezone.now() > InboxItem.objects.get(pk=item.pk).lease_expires_at, timeout=30)
    assert sweep_expired_leases() == 1
    assert wait_for(lambda: InboxItem.objects.get(pk=item.pk).state == LeaseState.DONE, timeout=30), second.output()
    item.refresh_from_db()
    assert item.attempts == 2
    output = pump_until(session, "got:survives-sigkill")
    assert output.count("got:survives-sigkill") == 1
    assert session.events.filter(kind="message.in").count() == 1
    assert sweep_expired_leases() == 0
