"""A wake-up the broker cannot take (Redis restarting) never fails the request whose work is committed."""

from __future__ import annotations

import logging

import pytest
from django.db import transaction
from kombu.exceptions import OperationalError as KombuOperationalError

from tess_site.tasks import enqueue_on_commit, sweep_expired_leases
from tests.testapp.models import Chore

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_wake_up_lost_to_a_down_broker_is_logged_and_the_commit_stands(monkeypatch, caplog):
    def broker_down(*args, **kwargs):
        raise KombuOperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(sweep_expired_leases, "apply_async", broker_down)
    with caplog.at_level(logging.WARNING, logger="tess_site.tasks"), transaction.atomic():
        chore = Chore.objects.create(label="committed")
        enqueue_on_commit(sweep_expired_leases)
    assert Chore.objects.filter(pk=chore.pk).exists()
    assert "wake-up for tess_site.tasks.sweep_expired_leases dropped" in caplog.text


def test_an_error_of_the_task_itself_still_propagates(monkeypatch):
    def bug(*args, **kwargs):
        raise RuntimeError("not a broker problem")

    monkeypatch.setattr(sweep_expired_leases, "apply_async", bug)
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueue_on_commit(sweep_expired_leases)
