from __future__ import annotations

import logging

from celery import shared_task

from tess_site.errors import TessError

from . import sender
from .deferred import ask_run
from .models import DiscordInteraction
from .relay import relay_bound_channels

logger = logging.getLogger(__name__)


@shared_task(name="sessions_app.discord.tasks.run_discord_ask", ignore_result=True, acks_late=True)
def run_discord_ask(interaction_pk: int) -> int | None:
    """Run one deferred ``/tess ask`` turn and queue its follow-up (idempotent: the interaction is claimed)."""
    try:
        return ask_run(interaction_pk=interaction_pk)
    except TessError as exc:
        # The turn was not accepted (access lost since the deferral): say so instead of thinking forever.
        sender.followup(DiscordInteraction.objects.get(pk=interaction_pk), f"Refused: {exc.message}")
        return None


@shared_task(name="sessions_app.discord.tasks.relay_discord_channels", ignore_result=True)
def relay_discord_channels() -> int:
    """Beat: queue other channels' turns to every bound Discord channel."""
    return relay_bound_channels()
