"""The Celery app's configuration and task plumbing, in-process (the test settings run tasks eagerly).

``test_celery_worker`` runs the same app in a real worker.
"""

from __future__ import annotations

import re

import pytest
from celery import shared_task
from django.db import transaction

from tess_site.celery import app
from tess_site.context import get_correlation_id, reset_correlation_id, set_correlation_id
from tess_site.tasks import enqueue_on_commit

seen: list[str] = []


@shared_task(name="tests.tess_site.test_celery.note_correlation_id", ignore_result=True)
def note_correlation_id() -> None:
    seen.append(get_correlation_id())


@pytest.fixture(autouse=True)
def _nothing_seen():
    seen.clear()


def test_the_app_acknowledges_late_requeues_on_worker_loss_and_speaks_only_json():
    conf = app.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.task_serializer == "json"
    assert conf.result_serializer == "json"
    assert list(conf.accept_content) == ["json"]
    assert conf.worker_prefetch_multiplier == 1


@pytest.mark.django_db(transaction=True)
def test_a_task_runs_under_the_correlation_id_it_was_queued_with():
    token = set_correlation_id("req-1234abcd-queued")
    try:
        with transaction.atomic():
            enqueue_on_commit(note_correlation_id)
            assert seen == []  # not before the commit
    finally:
        reset_correlation_id(token)
    assert seen == ["req-1234abcd-queued"]
    assert get_correlation_id() == "-"  # and the task's binding ended with the task


@pytest.mark.django_db(transaction=True)
def test_a_task_queued_outside_any_request_gets_a_correlation_id_of_its_own():
    enqueue_on_commit(note_correlation_id)
    enqueue_on_commit(note_correlation_id)
    assert len(seen) == 2
    assert all(re.fullmatch(r"[0-9a-f]{32}", cid) for cid in seen)
    assert seen[0] != seen[1]


@pytest.mark.django_db(transaction=True)
def test_a_task_queued_in_a_rolled_back_transaction_is_never_sent():
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        enqueue_on_commit(note_correlation_id)
        1 / 0  # noqa: B018
    assert seen == []


def test_the_celery_app_sees_only_celery_settings():
    """A worker shows its configuration to anyone on the broker; URLs with passwords must not be in it."""
    from tess_site.celery import app

    keys = set(app.conf.table(with_defaults=False))
    assert "CELERY_TASK_ACKS_LATE" in keys
    assert not {"REDIS_URL", "CACHES", "CHANNEL_LAYERS", "DATABASES", "SECRET_KEY", "TESS_MODEL_API_KEY"} & keys
