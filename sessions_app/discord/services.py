"""Linking Discord users to Tess users, channel bindings and deferred asks (the business rules)."""

from __future__ import annotations

import hashlib
import logging
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework import status

from sessions_app import selectors
from sessions_app.models import IngressBinding, IngressChannel, Session
from sessions_app.services import ingress_bind
from tess_site.accounts.models import ExternalIdentity
from tess_site.accounts.selectors import roles_for
from tess_site.accounts.services import identity_link
from tess_site.audit.services import record_audit
from tess_site.errors import Forbidden, InvalidInput, NotFound, TessError
from tess_site.scope import Channel, Role, Scope
from tess_site.tasks import enqueue_on_commit

from .models import DiscordInteraction, DiscordLinkCode, DiscordRelayCursor
from .tasks import run_discord_ask

logger = logging.getLogger(__name__)

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: typed by hand in Discord
REDEEM_ATTEMPTS = 10  # per Discord user per window
REDEEM_WINDOW_SECONDS = 600


class NotLinked(TessError):
    code = "discord_not_linked"
    status_code = status.HTTP_403_FORBIDDEN
    default_message = "Link your Discord account first: make a code with `tess link-code` and run `/tess link CODE`."


class TooManyAttempts(TessError):
    code = "rate_limited"
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_message = "Too many link attempts; wait a few minutes."


def _digest(code: str) -> str:
    normalized = code.strip().upper().replace("-", "").replace(" ", "")
    return hashlib.sha256(normalized.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedCode:
    code: str
    expires_at: datetime


def link_code_create(*, scope: Scope) -> IssuedCode:
    """A fresh one-time code for the scope's actor; earlier unused codes of theirs stop working."""
    if scope.actor is None:
        raise InvalidInput("Only people link Discord accounts.")
    raw = "".join(secrets.choice(CODE_ALPHABET) for _ in range(10))
    expires_at = timezone.now() + timedelta(minutes=settings.TESS_DISCORD_LINK_CODE_MINUTES)
    with transaction.atomic():
        DiscordLinkCode.objects.filter(tenant=scope.tenant, user=scope.actor, used_at=None).update(
            expires_at=timezone.now()
        )
        row = DiscordLinkCode.objects.create(
            tenant=scope.tenant, user=scope.actor, digest=_digest(raw), expires_at=expires_at
        )
        record_audit(
            scope, action="discord.link_code", target_type="discord_link_code", target_id=str(row.pk), outcome="ok"
        )
    return IssuedCode(code=f"{raw[:5]}-{raw[5:]}", expires_at=expires_at)


def link_code_redeem(*, discord_user_id: str, code: str, correlation_id: str) -> ExternalIdentity:
    """Link ``discord_user_id`` to the code's user. Single use holds under concurrent redemptions."""
    key = f"discord:redeem:{discord_user_id}"
    cache.add(key, 0, timeout=REDEEM_WINDOW_SECONDS)
    if cache.incr(key) > REDEEM_ATTEMPTS:
        raise TooManyAttempts()
    now = timezone.now()
    row = DiscordLinkCode.objects.filter(digest=_digest(code), used_at=None, expires_at__gt=now).first()
    if row is None:
        raise NotFound("That code is unknown, used or expired.")
    with transaction.atomic():
        if DiscordLinkCode.objects.filter(pk=row.pk, used_at=None).update(used_at=now, used_by=discord_user_id) != 1:
            raise NotFound("That code is unknown, used or expired.")
        scope = Scope(
            tenant=row.tenant,
            actor=row.user,
            channel=Channel.DISCORD,
            correlation_id=correlation_id,
            roles=roles_for(user=row.user, tenant=row.tenant),
        )
        return identity_link(scope=scope, provider=ExternalIdentity.Provider.DISCORD, external_id=discord_user_id)


def _bound_session_id(channel_id: str) -> Any:
    return (
        IngressBinding.objects.filter(channel=IngressChannel.DISCORD, external_ref=channel_id, active=True)
        .values_list("session_id", flat=True)
        .first()
    )


def discord_scope(*, discord_user_id: str, channel_id: str, correlation_id: str) -> Scope:
    """The Scope of a linked Discord user; in a bound channel, in the tenant of the channel's session.

    Raises ``NotLinked`` for a Discord user with no link (in that tenant).
    """
    links = ExternalIdentity.objects.select_related("user", "tenant").filter(
        provider=ExternalIdentity.Provider.DISCORD, external_id=discord_user_id
    )
    session_id = _bound_session_id(channel_id) if channel_id else None
    if session_id is not None:
        links = links.filter(tenant__in=Session.objects.filter(pk=session_id).values("tenant_id"))
    found = list(links[:2])
    if len(found) != 1:
        raise NotLinked()
    link = found[0]
    return Scope(
        tenant=link.tenant,
        actor=link.user,
        channel=Channel.DISCORD,
        correlation_id=correlation_id,
        session=str(session_id) if session_id else None,
        roles=roles_for(user=link.user, tenant=link.tenant),
    )


def bound_session(*, scope: Scope, channel_id: str) -> Session:
    """The session this channel is bound to, if the scope may read it (``NotFound`` otherwise)."""
    session_id = _bound_session_id(channel_id)
    if session_id is None:
        raise NotFound("This channel is not bound to a session; use `/tess bind SESSION_ID`.")
    return selectors.access_session(scope=scope, session_id=session_id)


def channel_bind(*, scope: Scope, channel_id: str, session_id: str) -> IngressBinding:
    session = selectors.access_session(scope=scope, session_id=session_id)
    if not selectors.can_operate(scope=scope, session=session):
        raise Forbidden("Binding a channel needs the session's owner or an operate grant.")
    with transaction.atomic():
        binding = ingress_bind(
            scope=scope, session_id=session.pk, channel=IngressChannel.DISCORD, external_ref=channel_id
        )
        # The channel hears turns from now on, not the session's history.
        DiscordRelayCursor.objects.create(binding=binding, last_seq=session.last_seq)
        record_audit(scope, action="discord.bind", target_type="session", target_id=str(session.pk), outcome="ok")
    return binding


def relay_restart(binding_ids: list[int], session_id: uuid.UUID) -> None:
    """Bindings moved to another session (a cutover or its rollback): their channels hear that session's
    turns from now on, not its history, and not the rest of the session they left."""
    last_seq = Session.objects.filter(pk=session_id).values_list("last_seq", flat=True).first() or 0
    DiscordRelayCursor.objects.filter(binding_id__in=binding_ids).update(last_seq=last_seq)


def ask_defer(*, scope: Scope, interaction: dict[str, Any], channel_id: str, text: str) -> DiscordInteraction:
    """Check the turn can be taken now; record the interaction and run the turn after commit (Celery)."""
    session = bound_session(scope=scope, channel_id=channel_id)
    if not scope.has_role(Role.OPERATOR) or not selectors.can_operate(scope=scope, session=session):
        raise Forbidden("Turns need the operator role and the session's owner or an operate grant.")
    if not text.strip():
        raise InvalidInput("Say something after `/tess ask`.")
    interaction_id, token = interaction.get("id"), interaction.get("token")
    application_id = interaction.get("application_id", "")
    if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in (interaction_id, token, application_id)):
        raise InvalidInput("The interaction has no usable id, token or application id.")
    if not 0 < len(str(interaction_id)) <= 64 or not str(token) or len(str(application_id)) > 64:
        raise InvalidInput("The interaction has no usable id, token or application id.")
    assert scope.actor is not None
    try:
        with transaction.atomic():
            row = DiscordInteraction.objects.create(
                interaction_id=str(interaction_id),
                application_id=str(application_id),
                token=str(token),
                tenant=scope.tenant,
                user=scope.actor,
                session=session,
                channel_id=channel_id,
                text=text,
            )
    except IntegrityError as exc:
        raise InvalidInput("This interaction was already received.") from exc
    enqueue_on_commit(run_discord_ask, row.pk)
    return row
