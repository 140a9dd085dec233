"""Outbox: events Tess pushes to bound channels that do not read the stream themselves (Discord).

A channel app registers a sender at start-up (``register_outbox_sender("discord", send)``). Web and CLI
clients read the stream, so they need no outbox. Without a sender for its channel an item fails closed.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

from tess_site.leases import LeaseState, claim, complete

from .models import OutboxItem, SessionEvent
from .wakeups import DELIVER_OUTBOX_ITEM, wake_on_commit

OutboxSender = Callable[[str, dict[str, object]], None]  # (external_ref, event frame) -> None; raises on failure

_senders: dict[str, OutboxSender] = {}


def register_outbox_sender(channel: str, sender: OutboxSender) -> None:
    _senders[channel] = sender


def outbox_deliver(*, item_id: int, worker: str) -> bool:
    """Send one outbox item if this worker can claim it. True when this call delivered it."""
    item = claim(OutboxItem, pk=item_id, worker=worker)
    if item is None:
        return False
    sender = _senders.get(item.channel)
    if sender is None:
        OutboxItem.objects.filter(pk=item.pk, lease_owner=worker).update(
            state=LeaseState.FAILED, last_error="no_sender", lease_owner="", lease_expires_at=None
        )
        return False
    event = SessionEvent.objects.get(session_id=item.session_id, seq=item.event_seq)
    sender(item.external_ref, {"seq": event.seq, "kind": event.kind, "ts": event.ts.isoformat(), "body": event.body})
    with transaction.atomic():
        return complete(item, worker=worker)


def wake_outbox_item(pk: object) -> None:
    """Deliver an outbox item after commit (and the lease sweeper's wake-up for a re-queued one)."""
    wake_on_commit(DELIVER_OUTBOX_ITEM, pk)
