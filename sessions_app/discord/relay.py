"""Relaying turns other channels took in a session to the Discord channels bound to it."""

from __future__ import annotations

from django.db import transaction

from sessions_app.models import IngressChannel, OutboxItem, SessionEvent
from sessions_app.outbox import wake_outbox_item

from .models import DiscordInteraction, DiscordRelayCursor
from .sender import bot_token

RELAYED_KINDS = ("turn.in", "turn.out")
RELAY_BATCH = 200


def relay_bound_channels() -> int:
    """Queue, for every bound Discord channel, the turns other channels took in its session since its cursor.

    A channel's own ``/tess ask`` turns are not echoed back (their replies go to the interaction). Returns
    the number of outbox items queued. Runs from beat; ``skip_locked`` lets several workers share it.
    """
    if not bot_token():
        return 0  # posting to a channel needs the bot
    queued = 0
    ids = list(
        DiscordRelayCursor.objects.filter(binding__active=True, binding__channel=IngressChannel.DISCORD).values_list(
            "pk", flat=True
        )
    )
    for pk in ids:
        with transaction.atomic():
            cursor = (
                DiscordRelayCursor.objects.select_for_update(skip_locked=True)
                .select_related("binding")
                .filter(pk=pk)
                .first()
            )
            if cursor is None:
                continue
            queued += _relay_one(cursor)
    return queued


def _relay_one(cursor: DiscordRelayCursor) -> int:
    binding = cursor.binding
    rows = list(
        SessionEvent.objects.filter(session_id=binding.session_id, seq__gt=cursor.last_seq)
        .order_by("seq")
        .values_list("seq", "kind", "body")[:RELAY_BATCH]
    )
    if not rows:
        return 0
    own_turns = set(
        DiscordInteraction.objects.filter(session_id=binding.session_id, channel_id=binding.external_ref)
        .exclude(turn_id="")
        .values_list("turn_id", flat=True)
    )
    items = [
        OutboxItem(
            session_id=binding.session_id,
            channel=IngressChannel.DISCORD,
            external_ref=binding.external_ref,
            event_seq=seq,
        )
        for seq, kind, body in rows
        if kind in RELAYED_KINDS and isinstance(body, dict) and body.get("turn_id") not in own_turns
    ]
    created = OutboxItem.objects.bulk_create(items)
    DiscordRelayCursor.objects.filter(pk=cursor.pk).update(last_seq=rows[-1][0])
    for item in created:
        wake_outbox_item(item.pk)
    return len(created)
