"""Discord link codes and the interactions Tess still owes a reply to."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from sessions_app.models import IngressBinding, Session
from tess_site.accounts.models import Tenant


class DiscordLinkCode(models.Model):
    """A one-time code a Tess user makes (drawer or CLI) and redeems in Discord with ``/tess link CODE``.

    Only the SHA-256 digest of the code is stored; it expires and is used at most once.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.CharField(max_length=64, blank=True)  # the Discord user id that redeemed it

    def __str__(self) -> str:
        return f"link code {self.pk} of {self.user_id}"


class DiscordInteraction(models.Model):
    """A deferred ``/tess ask``: the interaction token Tess follows up through, and the turn's text.

    ``interaction_id`` is unique, so Discord delivering one interaction twice never runs two turns.
    """

    interaction_id = models.CharField(max_length=64, unique=True)
    application_id = models.CharField(max_length=64)
    token = models.TextField()
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    channel_id = models.CharField(max_length=64)
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    answered_at = models.DateTimeField(null=True, blank=True)
    turn_id = models.CharField(max_length=64, blank=True)  # the gateway's turn, once it ran

    def __str__(self) -> str:
        return f"interaction {self.interaction_id}"


class DiscordRelayCursor(models.Model):
    """How far a bound channel has been sent the session's turns from other channels (drawer, CLI, others).

    Advanced in the transaction that queues the outbox items, so each event is relayed exactly once.
    """

    binding = models.OneToOneField(IngressBinding, on_delete=models.CASCADE, related_name="+")
    last_seq = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"relay {self.binding_id} @ {self.last_seq}"
