"""Migration between runtimes (seed 001, "Migration"): move a session's ingress bindings to a session on
another provider instance (cutover) and back (rollback).

Bindings move in place (their rows keep their ids), so whatever resolves a channel to its session — the
Discord interactions endpoint, the drawer and the CLI (``bindings.py``) — follows at once; the stream sockets
bound through a moved binding are told so (a ``binding.moved`` frame). A drawer's or CLI profile's binding
that lapsed (unused for ``TESS_CLIENT_BINDING_SECONDS``) does not move. Both sessions' rows are locked (in primary-key
order, so two migrations never deadlock on them) before the bindings are read, so two cutovers at once
never split one session's bindings between two targets: the second finds nothing left to move.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from rest_framework import status

from providers_app.registry import instances_for_tenant
from tess_site.audit.services import record_audit
from tess_site.errors import TessError
from tess_site.metrics import SESSION_CUTOVERS
from tess_site.scope import Scope

from . import events, selectors, stream
from .journal import events_append
from .models import IngressBinding, MigrationStatus, Session, SessionMigration, SessionStatus
from .services import _require_owner_or_admin


class SameProviderInstance(TessError):
    code = "cutover_same_provider_instance"
    status_code = status.HTTP_400_BAD_REQUEST
    default_message = "The target session must run on another provider instance than the source."


class NothingToMove(TessError):
    code = "cutover_nothing_to_move"
    status_code = status.HTTP_409_CONFLICT
    default_message = "The session has no active ingress bindings to move."


class TargetUnavailable(TessError):
    code = "cutover_target_unavailable"
    status_code = status.HTTP_409_CONFLICT
    default_message = "Bindings only move onto a running session on a provider instance of this tenant."


class NoOpenCutover(TessError):
    code = "rollback_nothing_to_roll_back"
    status_code = status.HTTP_409_CONFLICT
    default_message = "The session has no cutover left to roll back."


class BindingsMovedOn(TessError):
    code = "rollback_bindings_moved_on"
    status_code = status.HTTP_409_CONFLICT
    default_message = "Some of the moved bindings were moved again since; roll that migration back first."


# Called inside the migration's transaction with the ids of the bindings that moved and their new session
# (e.g. the Discord relay starts the moved channels at the new session's newest event).
BindingsMovedObserver = Callable[[list[int], uuid.UUID], None]
_observers: list[BindingsMovedObserver] = []


def register_bindings_moved_observer(observer: BindingsMovedObserver) -> None:
    if observer not in _observers:
        _observers.append(observer)


def _lock(*session_ids: uuid.UUID) -> dict[uuid.UUID, Session]:
    """Lock the sessions' rows in primary-key order. ``no_key``: inserts referring to them still go ahead.
    ``of=("self",)``: only the sessions; locking the joined tenant row too would interleave one shared lock
    between the two session locks and deadlock two cutovers whose sessions sort differently."""
    rows = (
        Session.objects.select_for_update(no_key=True, of=("self",))
        .filter(pk__in=session_ids)
        .order_by("pk")
        .select_related("tenant")
    )
    return {row.pk: row for row in rows}


def _check_destination(scope: Scope, session: Session) -> None:
    if session.status != SessionStatus.RUNNING or session.provider_instance not in instances_for_tenant(
        scope.tenant.slug
    ):
        raise TargetUnavailable()


def _move(*, binding_ids: list[int], to: Session) -> None:
    IngressBinding.objects.filter(pk__in=binding_ids).update(session=to)
    for observer in list(_observers):
        observer(binding_ids, to.pk)
    events.bindings_moved_on_commit(binding_ids)  # the drawer and `tess stream` follow at once


def _record_step(
    scope: Scope,
    *,
    migration: SessionMigration,
    direction: str,
    text_source: str,
    text_target: str,
    metadata: dict[str, Any],
) -> None:
    """One step of a migration (``cutover`` or ``rollback``): a system event in both streams, its audit row,
    and the metric counted after commit."""
    code = f"session.{direction}"
    for session_id, text in ((migration.source_id, text_source), (migration.target_id, text_target)):
        events_append(
            session_id=session_id, items=[(stream.EventKind.SYSTEM, stream.system_body(text=text, code=code))]
        )
    record_audit(
        scope,
        action=code,
        target_type="session_migration",
        target_id=str(migration.pk),
        outcome="ok",
        metadata={"source_session": str(migration.source_id), "target_session": str(migration.target_id), **metadata},
    )
    transaction.on_commit(lambda: SESSION_CUTOVERS.labels(direction=direction).inc())


def _channels(binding_ids: list[int]) -> str:
    kinds = sorted(set(IngressBinding.objects.filter(pk__in=binding_ids).values_list("channel", flat=True)))
    return ", ".join(kinds)


def session_cutover(*, scope: Scope, session_id: object, target_id: object) -> SessionMigration:
    """Move every active ingress binding of the session to ``target_id``, a running session of the same tenant
    on another provider instance. The caller owns both sessions or is a tenant admin."""
    source = selectors.access_session_managed(scope=scope, session_id=session_id)
    target = selectors.access_session_managed(scope=scope, session_id=target_id)
    _require_owner_or_admin(scope, source)
    _require_owner_or_admin(scope, target)
    if source.provider_instance == target.provider_instance:
        raise SameProviderInstance()
    assert scope.actor is not None
    with transaction.atomic():
        locked = _lock(source.pk, target.pk)
        _check_destination(scope, locked[target.pk])
        binding_ids = list(
            IngressBinding.objects.select_for_update()
            .filter(session_id=source.pk, active=True)
            .filter(Q(expires_at=None) | Q(expires_at__gt=timezone.now()))  # a client gone for long stays
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        if not binding_ids:
            raise NothingToMove()
        _move(binding_ids=binding_ids, to=locked[target.pk])
        migration = SessionMigration.objects.create(
            tenant=scope.tenant, source=source, target=target, binding_ids=binding_ids, created_by=scope.actor
        )
        channels = _channels(binding_ids)
        _record_step(
            scope,
            migration=migration,
            direction="cutover",
            text_source=f"Cut over to session {target.pk} on {target.provider_instance}: {channels} moved "
            f"(migration {migration.pk}).",
            text_target=f"Cut over from session {source.pk} on {source.provider_instance}: {channels} now bound "
            f"here (migration {migration.pk}).",
            metadata={
                "source_instance": source.provider_instance,
                "target_instance": target.provider_instance,
                "binding_ids": binding_ids,
            },
        )
    return migration


def session_rollback(*, scope: Scope, session_id: object, migration_id: int | None = None) -> SessionMigration:
    """Move the bindings of the session's newest open cutover (or of ``migration_id``) back to it.

    Exactly the bindings that cutover moved come back; ones ended since stay ended. If any was moved on to a
    third session, nothing moves (409): roll that later migration back first.
    """
    source = selectors.access_session_managed(scope=scope, session_id=session_id)
    _require_owner_or_admin(scope, source)
    assert scope.actor is not None
    with transaction.atomic():
        open_cutovers = SessionMigration.objects.select_for_update().filter(
            source=source, status=MigrationStatus.CUTOVER
        )
        if migration_id is not None:
            open_cutovers = open_cutovers.filter(pk=migration_id)
        migration = open_cutovers.order_by("-created_at", "-pk").select_related("target").first()
        if migration is None:
            raise NoOpenCutover()
        target = selectors.access_session_managed(scope=scope, session_id=migration.target_id)
        _require_owner_or_admin(scope, target)
        locked = _lock(source.pk, target.pk)
        _check_destination(scope, locked[source.pk])
        moved = list(
            IngressBinding.objects.select_for_update()
            .filter(pk__in=migration.binding_ids)
            .order_by("pk")
            .values_list("pk", "session_id", "active")
        )
        if any(active and on != target.pk for _, on, active in moved):
            raise BindingsMovedOn()
        back = [pk for pk, _, active in moved if active]
        _move(binding_ids=back, to=locked[source.pk])
        migration.status = MigrationStatus.ROLLED_BACK
        migration.rolled_back_by = scope.actor
        migration.rolled_back_at = timezone.now()
        migration.save(update_fields=["status", "rolled_back_by", "rolled_back_at"])
        channels = _channels(back) or "nothing (the moved bindings had ended)"
        _record_step(
            scope,
            migration=migration,
            direction="rollback",
            text_source=f"Rolled back from session {target.pk}: {channels} bound here again (migration "
            f"{migration.pk}).",
            text_target=f"Rolled back to session {source.pk}: {channels} moved away (migration {migration.pk}).",
            metadata={"binding_ids": back, "ended_binding_ids": [pk for pk, _, active in moved if not active]},
        )
    return migration


def migrations_list(*, scope: Scope, session_id: object) -> list[SessionMigration]:
    session = selectors.access_session_managed(scope=scope, session_id=session_id)
    return list(selectors.migrations_of(session=session)[:200])
