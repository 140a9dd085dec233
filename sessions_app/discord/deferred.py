"""A deferred ``/tess ask``: the turn runs after the interaction was acknowledged, then its reply is queued."""

from __future__ import annotations

import uuid
from contextlib import suppress

from django.db import DatabaseError, transaction
from django.utils import timezone

from sessions_app.gateway import TurnResult, turn_handle
from sessions_app.models import IngressChannel, OutboxItem
from sessions_app.outbox import wake_outbox_item
from tess_site.accounts.selectors import roles_for
from tess_site.scope import Channel, Scope

from .models import DiscordInteraction
from .progress import FollowupProgress


def ask_run(*, interaction_pk: int) -> int | None:
    """Run the deferred turn once and queue its reply to the interaction webhook. Returns the outbox item id.

    The claim commits first, so the turn (which asks a model) runs outside any transaction; the reply is
    queued in the transaction that writes the turn. A turn that fails here gives the claim back.
    """
    with transaction.atomic():
        claimed = DiscordInteraction.objects.filter(pk=interaction_pk, answered_at=None).update(
            answered_at=timezone.now()
        )
        if claimed != 1:
            return None
        row = DiscordInteraction.objects.select_related("tenant", "user").get(pk=interaction_pk)
    scope = Scope(
        tenant=row.tenant,
        actor=row.user,
        channel=Channel.DISCORD,
        correlation_id=uuid.uuid4().hex,
        roles=roles_for(user=row.user, tenant=row.tenant),
    )
    queued: list[int] = []

    def reply(result: TurnResult) -> None:
        DiscordInteraction.objects.filter(pk=row.pk).update(turn_id=result.turn_id)
        replies = [e for e in result.events if e["kind"] == "turn.out"] or result.events[-1:]
        if not replies:
            return
        item = OutboxItem.objects.create(
            session_id=row.session_id,
            channel=IngressChannel.DISCORD,
            external_ref=f"interaction:{row.pk}",
            event_seq=replies[-1]["seq"],
        )
        wake_outbox_item(item.pk)
        queued.append(int(item.pk))

    # The deferred message grows while the model writes (``progress``); the outbox sends the whole reply last.
    progress = FollowupProgress(row)
    try:
        turn_handle(scope=scope, session_id=str(row.session_id), text=row.text, finish=reply, progress=progress)
    except BaseException:
        with suppress(DatabaseError):  # a dead database keeps the claim; the stream shows the turn failed
            DiscordInteraction.objects.filter(pk=row.pk, turn_id="").update(answered_at=None)
        raise
    finally:
        progress.close()
    return queued[0] if queued else None
