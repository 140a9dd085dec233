"""Durable work claimed with a lease in the database.

The broker only carries wake-ups; the row is the work. A worker claims an item with a conditional UPDATE
(only one claimer can see exactly one row change), does the work, and completes it while it still holds
the lease. A worker that dies leaves its lease to expire; the periodic sweeper puts the item back to
``pending`` and wakes a worker, so recovery never waits on the broker's visibility timeout.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TypeVar

from django.conf import settings
from django.db import models, transaction
from django.db.models import F, Q
from django.utils import timezone


class LeaseLost(Exception):
    """A worker's lease expired and the item was handed on before the worker could record its result."""


class LeaseState(models.TextChoices):
    PENDING = "pending", "pending"
    LEASED = "leased", "leased"
    DONE = "done", "done"
    FAILED = "failed", "failed"


class LeasedWork(models.Model):
    """Base of every table of durable work (inbox, outbox, approval executions, hand-offs)."""

    state = models.CharField(max_length=8, choices=LeaseState.choices, default=LeaseState.PENDING)
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=5)
    available_at = models.DateTimeField(default=timezone.now)
    last_error = models.CharField(max_length=200, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        indexes = [models.Index(fields=["state", "lease_expires_at"])]


W = TypeVar("W", bound=LeasedWork)


def new_worker_id() -> str:
    return uuid.uuid4().hex


def claim(model: type[W], *, pk: object, worker: str, lease_seconds: int | None = None) -> W | None:
    """Lease item ``pk`` for ``worker``; ``None`` if it is not pending and due (someone else has it, or done)."""
    now = timezone.now()
    expires = now + timedelta(seconds=lease_seconds or settings.TESS_LEASE_SECONDS)
    changed = model._default_manager.filter(pk=pk, state=LeaseState.PENDING, available_at__lte=now).update(
        state=LeaseState.LEASED, lease_owner=worker, lease_expires_at=expires, attempts=F("attempts") + 1
    )
    if changed != 1:
        return None
    return model._default_manager.get(pk=pk)


def complete(item: LeasedWork, *, worker: str) -> bool:
    """Mark ``item`` done if ``worker`` still holds its lease.

    Call inside the transaction that makes the work's effect, so effect and completion commit together:
    a worker whose lease was swept and re-claimed gets ``False`` and must roll its effect back.
    """
    now = timezone.now()
    changed = (
        type(item)
        ._default_manager.filter(pk=item.pk, state=LeaseState.LEASED, lease_owner=worker, lease_expires_at__gt=now)
        .update(state=LeaseState.DONE, completed_at=now, lease_expires_at=None)
    )
    return changed == 1


def fail(item: LeasedWork, *, worker: str, error: str, retry_in_seconds: int = 0) -> LeaseState | None:
    """Give ``item`` back after a failure: pending again with a delay, or failed after its last attempt."""
    refreshed = type(item)._default_manager.filter(pk=item.pk, state=LeaseState.LEASED, lease_owner=worker)
    final = item.attempts >= item.max_attempts
    state = LeaseState.FAILED if final else LeaseState.PENDING
    changed = refreshed.update(
        state=state,
        lease_owner="",
        lease_expires_at=None,
        last_error=error[:200],
        available_at=timezone.now() + timedelta(seconds=retry_in_seconds),
    )
    return state if changed == 1 else None


@dataclass(frozen=True)
class LeasedWorkKind:
    model: type[LeasedWork]
    wake: Callable[[object], None]  # queue a wake-up for one item id, e.g. ``lambda pk: task.delay(pk)``


_kinds: list[LeasedWorkKind] = []


def register_leased_work(model: type[LeasedWork], wake: Callable[[object], None]) -> None:
    """Called from ``AppConfig.ready()`` by each app that owns a table of durable work."""
    if all(kind.model is not model for kind in _kinds):
        _kinds.append(LeasedWorkKind(model=model, wake=wake))


def registered_kinds() -> list[LeasedWorkKind]:
    return list(_kinds)


def sweep(model: type[LeasedWork], wake: Callable[[object], None]) -> list[object]:
    """Return expired leases of ``model`` to ``pending`` and wake a worker for each; returns their ids."""
    now = timezone.now()
    with transaction.atomic():
        expired = list(
            model._default_manager.select_for_update(skip_locked=True)
            .filter(state=LeaseState.LEASED, lease_expires_at__lte=now)
            .values_list("pk", flat=True)[:500]
        )
        if expired:
            # Items out of attempts fail here instead of looping forever.
            model._default_manager.filter(pk__in=expired, attempts__gte=F("max_attempts")).update(
                state=LeaseState.FAILED, lease_owner="", lease_expires_at=None, last_error="lease expired"
            )
            model._default_manager.filter(pk__in=expired, state=LeaseState.LEASED).update(
                state=LeaseState.PENDING, lease_owner="", lease_expires_at=None
            )
        requeued = list(
            model._default_manager.filter(pk__in=expired, state=LeaseState.PENDING).values_list("pk", flat=True)
        )
        for pk in requeued:
            transaction.on_commit(partial(wake, pk))
    return requeued


REQUEUE_BATCH = 500


def requeue_due(
    model: type[LeasedWork],
    wake: Callable[[object], None],
    *,
    where: Q | None = None,
    settle_seconds: int | None = None,
    unattempted_grace_seconds: int | None = None,
) -> int:
    """Wake pending items of ``model`` that are due again; returns how many (periodic, per kind of work).

    An item left ``pending`` after a transient failure has no task any more once its task gave up: this
    wakes it when ``available_at`` comes. The kinds differ in which items a fresh wake-up may still be on
    its way for, and those are left alone:

    - ``settle_seconds``: items created less than this long ago (their first wake-up is queued on commit);
    - ``unattempted_grace_seconds``: items never attempted are woken only this long after they were due
      (their wake-up was lost, e.g. the broker was down); items attempted before are woken when due.

    ``where`` narrows the items further (a hand-off is only re-dispatched while queued for an adapter).
    Waking an item twice is harmless: only one claim wins.
    """
    now = timezone.now()
    items = model._default_manager.filter(state=LeaseState.PENDING)
    if unattempted_grace_seconds is None:
        items = items.filter(available_at__lte=now)
    else:
        lost = now - timedelta(seconds=unattempted_grace_seconds)
        items = items.filter(Q(attempts__gt=0, available_at__lte=now) | Q(attempts=0, available_at__lte=lost))
    if settle_seconds is not None:
        # Every kind that settles has its own ``created_at`` (LeasedWork itself does not).
        items = items.filter(created_at__lt=now - timedelta(seconds=settle_seconds))  # type: ignore[misc]
    if where is not None:
        items = items.filter(where)
    due = list(items.values_list("pk", flat=True)[:REQUEUE_BATCH])
    for pk in due:
        wake(pk)
    return len(due)
