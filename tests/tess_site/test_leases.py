"""Leased durable work, against a real table (``tests.testapp.Chore``)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from tess_site.leases import LeaseState, claim, complete, fail, new_worker_id, sweep
from tests.testapp.models import Chore


class EffectRolledBack(Exception):
    """Raised to undo a worker's effect when it no longer holds the lease."""


def _expire_lease(chore: Chore) -> None:
    """What the clock does to a worker that stalls past its lease."""
    Chore.objects.filter(pk=chore.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def _do_chore(chore: Chore, *, worker: str) -> bool:
    """Apply the effect and complete in one transaction; a worker that lost its lease leaves no effect."""
    try:
        with transaction.atomic():
            Chore.objects.filter(pk=chore.pk).update(effects=F("effects") + 1)
            if not complete(chore, worker=worker):
                raise EffectRolledBack
    except EffectRolledBack:
        return False
    return True


@pytest.mark.django_db
def test_a_second_claim_of_a_leased_item_gets_nothing():
    chore = Chore.objects.create(label="one")
    first, second = new_worker_id(), new_worker_id()
    claimed = claim(Chore, pk=chore.pk, worker=first)
    assert claimed is not None
    assert (claimed.state, claimed.lease_owner, claimed.attempts) == (LeaseState.LEASED, first, 1)
    assert claimed.lease_expires_at is not None and claimed.lease_expires_at > timezone.now()
    assert claim(Chore, pk=chore.pk, worker=second) is None
    assert claim(Chore, pk=chore.pk, worker=first) is None  # not even its own holder leases it twice


@pytest.mark.django_db
def test_a_done_item_cannot_be_claimed():
    chore = Chore.objects.create(label="one")
    worker = new_worker_id()
    claimed = claim(Chore, pk=chore.pk, worker=worker)
    assert claimed is not None and complete(claimed, worker=worker)
    assert claim(Chore, pk=chore.pk, worker=new_worker_id()) is None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_exactly_one_of_eight_racing_workers_claims_an_item() -> None:
    chore = Chore.objects.create(label="contested")
    workers = [new_worker_id() for _ in range(8)]
    start = threading.Barrier(len(workers), timeout=10)
    winners: list[str] = []
    errors: list[BaseException] = []

    def race(worker: str) -> None:
        try:
            start.wait()
            if claim(Chore, pk=chore.pk, worker=worker) is not None:
                winners.append(worker)
        except BaseException as exc:  # surfaced below; a thread's exception is otherwise lost
            errors.append(exc)
        finally:
            connection.close()  # each thread has its own connection

    threads = [threading.Thread(target=race, args=(worker,)) for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    assert len(winners) == 1
    chore.refresh_from_db()
    assert (chore.lease_owner, chore.attempts) == (winners[0], 1)


@pytest.mark.django_db
def test_a_worker_whose_lease_was_swept_and_reclaimed_cannot_complete_so_the_effect_happens_once():
    chore = Chore.objects.create(label="slow")
    stalled, rescuer = new_worker_id(), new_worker_id()
    mine = claim(Chore, pk=chore.pk, worker=stalled)
    assert mine is not None
    _expire_lease(mine)
    assert sweep(Chore, lambda pk: None) == [chore.pk]
    theirs = claim(Chore, pk=chore.pk, worker=rescuer)
    assert theirs is not None

    assert _do_chore(mine, worker=stalled) is False  # wakes up while the rescuer holds the lease
    assert _do_chore(theirs, worker=rescuer) is True
    assert _do_chore(mine, worker=stalled) is False  # and after the rescuer finished

    chore.refresh_from_db()
    assert (chore.state, chore.effects, chore.lease_owner) == (LeaseState.DONE, 1, rescuer)


@pytest.mark.django_db
def test_a_worker_cannot_complete_after_its_lease_expired_even_before_a_sweep():
    chore = Chore.objects.create(label="slow")
    worker = new_worker_id()
    mine = claim(Chore, pk=chore.pk, worker=worker)
    assert mine is not None
    _expire_lease(mine)
    assert _do_chore(mine, worker=worker) is False
    chore.refresh_from_db()
    assert (chore.state, chore.effects) == (LeaseState.LEASED, 0)


@pytest.mark.django_db(transaction=True)
def test_sweep_returns_expired_items_to_pending_and_wakes_only_after_commit() -> None:
    expired = Chore.objects.create(label="expired")
    current = Chore.objects.create(label="current")
    idle = Chore.objects.create(label="idle")
    for chore in (expired, current):
        assert claim(Chore, pk=chore.pk, worker=new_worker_id()) is not None
    _expire_lease(expired)
    woken: list[object] = []

    with transaction.atomic():
        requeued = sweep(Chore, woken.append)
        assert requeued == [expired.pk]
        assert woken == []  # a worker woken now would find the row still leased
    assert woken == [expired.pk]

    states = dict(Chore.objects.values_list("pk", "state"))
    assert states == {expired.pk: LeaseState.PENDING, current.pk: LeaseState.LEASED, idle.pk: LeaseState.PENDING}
    expired.refresh_from_db()
    assert (expired.lease_owner, expired.lease_expires_at) == ("", None)
    assert claim(Chore, pk=expired.pk, worker=new_worker_id()) is not None


@pytest.mark.django_db(transaction=True)
def test_a_sweep_that_is_rolled_back_wakes_nobody() -> None:
    chore = Chore.objects.create(label="expired")
    assert claim(Chore, pk=chore.pk, worker=new_worker_id()) is not None
    _expire_lease(chore)
    woken: list[object] = []
    with pytest.raises(EffectRolledBack), transaction.atomic():
        assert sweep(Chore, woken.append) == [chore.pk]
        raise EffectRolledBack
    assert woken == []
    chore.refresh_from_db()
    assert chore.state == LeaseState.LEASED


@pytest.mark.django_db(transaction=True)
def test_an_expired_item_out_of_attempts_fails_instead_of_going_back_in_line() -> None:
    chore = Chore.objects.create(label="doomed", max_attempts=2, attempts=1)
    assert claim(Chore, pk=chore.pk, worker=new_worker_id()) is not None  # attempt 2 of 2
    _expire_lease(chore)
    woken: list[object] = []
    assert sweep(Chore, woken.append) == []
    assert woken == []
    chore.refresh_from_db()
    assert (chore.state, chore.last_error, chore.lease_owner) == (LeaseState.FAILED, "lease expired", "")
    assert claim(Chore, pk=chore.pk, worker=new_worker_id()) is None


@pytest.mark.django_db
def test_fail_with_a_retry_delay_keeps_the_item_unclaimable_until_it_is_due():
    chore = Chore.objects.create(label="flaky")
    worker = new_worker_id()
    mine = claim(Chore, pk=chore.pk, worker=worker)
    assert mine is not None
    before = timezone.now()
    assert fail(mine, worker=worker, error="upstream timed out", retry_in_seconds=60) == LeaseState.PENDING

    chore.refresh_from_db()
    assert chore.state == LeaseState.PENDING
    assert chore.last_error == "upstream timed out"
    assert chore.available_at >= before + timedelta(seconds=60)
    assert claim(Chore, pk=chore.pk, worker=new_worker_id()) is None

    Chore.objects.filter(pk=chore.pk).update(available_at=timezone.now() - timedelta(seconds=1))  # time passes
    again = claim(Chore, pk=chore.pk, worker=new_worker_id())
    assert again is not None and again.attempts == 2


@pytest.mark.django_db
def test_fail_on_the_last_attempt_marks_the_item_failed():
    chore = Chore.objects.create(label="flaky", max_attempts=1)
    worker = new_worker_id()
    mine = claim(Chore, pk=chore.pk, worker=worker)
    assert mine is not None
    assert fail(mine, worker=worker, error="x" * 500) == LeaseState.FAILED
    chore.refresh_from_db()
    assert chore.state == LeaseState.FAILED
    assert len(chore.last_error) == 200
    assert claim(Chore, pk=chore.pk, worker=new_worker_id()) is None


@pytest.mark.django_db
def test_fail_by_a_worker_that_no_longer_holds_the_lease_changes_nothing():
    chore = Chore.objects.create(label="slow")
    stalled, rescuer = new_worker_id(), new_worker_id()
    mine = claim(Chore, pk=chore.pk, worker=stalled)
    assert mine is not None
    _expire_lease(mine)
    sweep(Chore, lambda pk: None)
    assert claim(Chore, pk=chore.pk, worker=rescuer) is not None
    assert fail(mine, worker=stalled, error="too late") is None
    chore.refresh_from_db()
    assert (chore.state, chore.lease_owner, chore.last_error) == (LeaseState.LEASED, rescuer, "")
