"""The drawer's and the CLI's ingress bindings (seed 001: "Discord and CLI bind to the same authorized
session"; "Migration: ... cutover, rollback").

A browser session (the drawer) and a CLI profile (its personal token) bind to the session they use as they
use it: the drawer when its stream socket opens, the CLI before each command that uses a session
(``POST /api/v1/sessions/{id}/bind/``); a CLI profile's stream sockets only follow the binding its commands
made, so one profile watching many sessions moves nothing. Each holds at most one binding,
which lapses ``TESS_CLIENT_BINDING_SECONDS`` after its last use, so a cutover moves only clients still using
the session. The reference is derived from the credential, never given by the client: ``token:<id>`` for a
token, a hash of the browser's session key for a browser (the key itself is a credential).

After a cutover moved a client's binding, naming the old session again follows the move: the bind answers
the session the binding is on now (if the caller may read it), rather than pulling the client back. The
stream socket tells a bound client at once with a ``binding.moved`` frame (see ``consumers.py``).
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from tess_site.scope import Channel, Scope

from . import selectors
from .models import IngressBinding, IngressChannel, MigrationStatus, Session, SessionEvent, SessionMigration

CLIENT_CHANNELS = {Channel.WEB: IngressChannel.WEB, Channel.CLI: IngressChannel.CLI}
MOVE_CODES = ("session.cutover", "session.rollback")
MIGRATIONS_LOOKED_AT = 50


def client_ref(*, scope: Scope, token_id: int | None, session_key: str | None) -> str | None:
    """The binding reference of the caller's browser session or CLI profile; None for other channels."""
    if scope.channel == Channel.CLI and token_id is not None:
        return f"token:{int(token_id)}"
    if scope.channel == Channel.WEB and session_key:
        return "browser:" + hashlib.sha256(session_key.encode()).hexdigest()[:48]
    return None


@dataclass(frozen=True)
class ClientBinding:
    binding_id: int
    session_id: uuid.UUID  # the session the client now uses
    expires_at: datetime
    followed_from: uuid.UUID | None = None  # the session the client named, when a cutover moved it on
    migration_id: int | None = None

    def describe(self) -> dict[str, Any]:
        followed = {"from": str(self.followed_from), "migration": self.migration_id} if self.followed_from else None
        return {"session_id": str(self.session_id), "expires_at": self.expires_at, "followed": followed}


def _expiry() -> datetime:
    return timezone.now() + timedelta(seconds=settings.TESS_CLIENT_BINDING_SECONDS)


def _live(binding: IngressBinding, now: datetime) -> bool:
    return binding.active and (binding.expires_at is None or binding.expires_at > now)


def _moved_from(binding: IngressBinding, session_id: uuid.UUID) -> SessionMigration | None:
    """The open cutover from ``session_id`` that moved ``binding`` (it may have moved on since), if any."""
    open_ones = SessionMigration.objects.filter(source_id=session_id, status=MigrationStatus.CUTOVER).order_by(
        "-created_at", "-pk"
    )[:MIGRATIONS_LOOKED_AT]
    return next((m for m in open_ones if binding.pk in (m.binding_ids or [])), None)


def client_binding_on(*, scope: Scope, session_id: uuid.UUID, ref: str) -> ClientBinding | None:
    """The caller's live binding, if it is on ``session_id`` or a cutover moved it from there (read only: a
    socket of a CLI profile follows the binding its commands made, and watching a session does not move it).
    A binding moved before the socket looked is still returned, so the socket can say where it went."""
    channel = CLIENT_CHANNELS[scope.channel]
    now = timezone.now()
    current = IngressBinding.objects.filter(channel=channel, external_ref=ref, active=True).order_by("pk").first()
    if current is None or not _live(current, now):
        return None
    if current.session_id != session_id and _moved_from(current, session_id) is None:
        return None
    return ClientBinding(binding_id=current.pk, session_id=current.session_id, expires_at=current.expires_at or now)


def client_bind(*, scope: Scope, session_id: object, ref: str) -> ClientBinding:
    """Bind the caller's browser session or CLI profile (``ref``) to the session it uses, renewing its expiry.

    If a cutover moved this client's live binding away from ``session_id``, the binding stays where it is and
    the answer names that session (``followed_from`` the one asked for); otherwise the client's binding moves
    to ``session_id`` (any other it had ends)."""
    session = selectors.access_session(scope=scope, session_id=session_id)
    for attempt in range(3):
        try:
            return _bind(scope=scope, session=session, ref=ref)
        except IntegrityError:
            # Two sockets of one browser session binding at once: the other one's binding is there now.
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _bind(*, scope: Scope, session: Session, ref: str) -> ClientBinding:
    channel = CLIENT_CHANNELS[scope.channel]
    now, expires = timezone.now(), _expiry()
    with transaction.atomic():
        current = (
            IngressBinding.objects.select_for_update()
            .filter(channel=channel, external_ref=ref, active=True)
            .order_by("pk")
            .first()
        )
        if current is not None and _live(current, now):
            if current.session_id == session.pk:
                IngressBinding.objects.filter(pk=current.pk).update(expires_at=expires)
                return ClientBinding(binding_id=current.pk, session_id=session.pk, expires_at=expires)
            migration = _moved_from(current, session.pk)
            if migration is not None and selectors.can_read_session(scope=scope, session_id=current.session_id):
                IngressBinding.objects.filter(pk=current.pk).update(expires_at=expires)
                return ClientBinding(
                    binding_id=current.pk,
                    session_id=current.session_id,
                    expires_at=expires,
                    followed_from=session.pk,
                    migration_id=migration.pk,
                )
        if current is not None:
            IngressBinding.objects.filter(pk=current.pk).update(active=False, ended_at=now)
        created = IngressBinding.objects.create(session=session, channel=channel, external_ref=ref, expires_at=expires)
    return ClientBinding(binding_id=created.pk, session_id=session.pk, expires_at=expires)


def binding_renew(*, binding_id: int, session_id: uuid.UUID) -> None:
    """A bound stream socket still in use: its binding (if it is still on ``session_id``) lapses later."""
    IngressBinding.objects.filter(pk=binding_id, session_id=session_id, active=True).update(expires_at=_expiry())


def binding_moved(*, binding_id: int, session_id: uuid.UUID) -> dict[str, Any] | None:
    """The ``binding.moved`` frame body for a stream socket of ``session_id`` whose binding a cutover or a
    rollback moved elsewhere: ``{"from", "to", "migration", "cursor"}``, where ``cursor`` is the seq after
    which the new session's stream shows the move. None while the binding is still here (or has ended: the
    client bound itself elsewhere, so there is nothing to follow)."""
    binding = IngressBinding.objects.filter(pk=binding_id, active=True).first()
    if binding is None or binding.session_id == session_id:
        return None
    moves = SessionMigration.objects.filter(source_id__in=[session_id, binding.session_id]).order_by(
        "-created_at", "-pk"
    )[:MIGRATIONS_LOOKED_AT]
    migration = next((m for m in moves if binding.pk in (m.binding_ids or [])), None)
    shown = (
        SessionEvent.objects.filter(session_id=binding.session_id, kind="system", body__code__in=MOVE_CODES)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return {
        "from": str(session_id),
        "to": str(binding.session_id),
        "migration": migration.pk if migration is not None else None,
        "cursor": max(int(shown or 1) - 1, 0),
    }
