"""Permission-aware reads of sessions. Every read of a session applies the rule of ``sessions_visible``.

A session is visible to its owner and to users granted ``view_session`` on it (directly or through a
group), within the scope's tenant; to everyone else it does not exist (404). Reads of one session check
the same rule in steps (``_visible``): the session in the tenant, then its owner, then a grant.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from tess_site import rows
from tess_site.errors import NotFound
from tess_site.scope import Role, Scope

from .models import (
    AttachMode,
    Budget,
    ConversationSummary,
    RuntimeAttachment,
    Session,
    SessionEvent,
    SessionGroupObjectPermission,
    SessionMigration,
    SessionUserObjectPermission,
    TurnRun,
    UsageDay,
)
from .stream import EventKind

VIEW = "view_session"
OPERATE = "operate_session"


def sessions_visible(*, scope: Scope) -> QuerySet[Session]:
    """The sessions the scope's actor may read: their own in the tenant and those granted to them.

    Written as ``pk IN (own UNION ALL granted)`` rather than ``owner = me OR granted``: each part is read
    through its own index (``(tenant, owner, created_at)``, the grant tables' user and group keys), so the
    cost follows the actor's sessions, not the tenant's. An OR across the two would scan the tenant.
    """
    if scope.actor is None:
        return Session.objects.filter(tenant=scope.tenant)
    own = Session.objects.filter(tenant=scope.tenant, owner=scope.actor).order_by().values("pk")
    by_user = (
        SessionUserObjectPermission.objects.filter(user=scope.actor, permission__codename=VIEW)
        .order_by()
        .values("content_object_id")
    )
    by_group = (
        SessionGroupObjectPermission.objects.filter(group__user=scope.actor, permission__codename=VIEW)
        .order_by()
        .values("content_object_id")
    )
    return Session.objects.filter(tenant=scope.tenant, pk__in=own.union(by_user, by_group, all=True))


def sessions_listed(*, scope: Scope) -> QuerySet[Session]:
    """The session list: visible sessions with their owners, newest first."""
    return sessions_visible(scope=scope).select_related("owner").order_by("-created_at", "-pk")


def _parse_id(session_id: object) -> uuid.UUID:
    try:
        return uuid.UUID(str(session_id))
    except ValueError as exc:
        raise NotFound("No such session.") from exc


def access_session(*, scope: Scope, session_id: object) -> Session:
    """The session if the scope may read it; ``NotFound`` otherwise (indistinguishable from absent)."""
    pk = _parse_id(session_id)
    session = Session.objects.select_related("owner").filter(tenant=scope.tenant, pk=pk).order_by().first()
    return _visible(scope, session, pk)


_TURN_SESSION = f"""
    SELECT {rows.columns(Session, "s")},
           EXISTS (SELECT 1 FROM {SessionEvent._meta.db_table} e WHERE e.session_id = s.id AND e.kind = %s),
           EXISTS (SELECT 1 FROM {TurnRun._meta.db_table} t WHERE t.started_at < %s),
           EXISTS (SELECT 1 FROM {Budget._meta.db_table} b WHERE b.tenant_id = s.tenant_id)
      FROM {Session._meta.db_table} s
     WHERE s.tenant_id = %s AND s.id = %s
"""  # noqa: S608 (table and column names are the models')


class TurnSession(NamedTuple):
    session: Session
    had_turn: bool  # the session has had a turn before
    abandoned: bool  # some turn anywhere started before ``stale_before`` and is still running
    budgeted: bool  # the session's tenant has a budget of any kind: a model turn must be admitted (budgets)


def access_session_for_turn(*, scope: Scope, session_id: object, stale_before: datetime) -> TurnSession:
    """``access_session`` for the gateway, with whether the session has had a turn yet, whether any turn is
    running since before ``stale_before`` and whether its tenant has budgets: one query, written as SQL on
    PostgreSQL because every turn makes it (bench/b_turns.py)."""
    pk = _parse_id(session_id)
    if connection.vendor != "postgresql":
        turns = SessionEvent.objects.filter(session=OuterRef("pk"), kind=EventKind.TURN_IN)
        found = Session.objects.annotate(had_turn=Exists(turns)).filter(tenant=scope.tenant, pk=pk).order_by().first()
        abandoned = TurnRun.objects.filter(started_at__lt=stale_before).exists()
        budgeted = Budget.objects.filter(tenant=scope.tenant).exists()
        had_turn = bool(getattr(found, "had_turn", False))
        return TurnSession(_visible(scope, found, pk), had_turn, abandoned, budgeted)
    with rows.hot_cursor() as cursor:
        cursor.execute(_TURN_SESSION, [EventKind.TURN_IN.value, stale_before, scope.tenant.pk, pk])
        row = cursor.fetchone()
    if row is None:
        raise NotFound("No such session.")
    *columns, had_turn, abandoned, budgeted = row
    return TurnSession(_visible(scope, rows.instance(Session, columns), pk), had_turn, abandoned, budgeted)


def _visible(scope: Scope, session: Session | None, pk: uuid.UUID) -> Session:
    """The rule of ``sessions_visible`` for one session already looked up in the scope's tenant, in the
    cheap order: its owner first, a view grant only for anyone else."""
    if session is None or not (scope.actor is None or session.owner_id == scope.actor.pk or _granted(scope, pk, VIEW)):
        raise NotFound("No such session.")
    return session


def _granted(scope: Scope, pk: uuid.UUID, codename: str) -> bool:
    """A direct or group grant of ``codename`` on session ``pk`` to the scope's actor."""
    return (
        SessionUserObjectPermission.objects.filter(
            user=scope.actor, permission__codename=codename, content_object_id=pk
        ).exists()
        or SessionGroupObjectPermission.objects.filter(
            group__user=scope.actor, permission__codename=codename, content_object_id=pk
        ).exists()
    )


def access_session_managed(*, scope: Scope, session_id: object) -> Session:
    """A session the scope may manage: visible to it, or anywhere in the tenant for a tenant admin.

    ``NotFound`` otherwise; callers still check owner-or-admin before changing anything.
    """
    if scope.has_role(Role.ADMIN):
        session = Session.objects.select_related("owner").filter(tenant=scope.tenant, pk=_parse_id(session_id)).first()
        if session is None:
            raise NotFound("No such session.")
        return session
    return access_session(scope=scope, session_id=session_id)


def migrations_of(*, session: Session) -> QuerySet[SessionMigration]:
    """Cutovers from or to an already-authorized session, newest first."""
    return (
        SessionMigration.objects.filter(Q(source=session) | Q(target=session))
        .select_related("created_by", "rolled_back_by")
        .order_by("-created_at", "-pk")
    )


def can_read_session(*, scope: Scope, session_id: object) -> bool:
    try:
        pk = _parse_id(session_id)
    except NotFound:
        return False
    return sessions_visible(scope=scope).filter(pk=pk).exists()


def can_operate(*, scope: Scope, session: Session) -> bool:
    """Raw input needs ownership or an ``operate_session`` grant (on top of an interactive attachment)."""
    if scope.actor is None:
        return False
    if session.owner_id == scope.actor.pk:
        return True
    return session.pk in set(
        SessionUserObjectPermission.objects.filter(
            user=scope.actor, permission__codename=OPERATE, content_object=session
        ).values_list("content_object_id", flat=True)
    ) | set(
        SessionGroupObjectPermission.objects.filter(
            group__user=scope.actor, permission__codename=OPERATE, content_object=session
        ).values_list("content_object_id", flat=True)
    )


def active_attachments(*, session: Session) -> QuerySet[RuntimeAttachment]:
    """Attachments not detached and not idle past ``TESS_ATTACH_IDLE_SECONDS``."""
    idle_since = timezone.now() - timedelta(seconds=settings.TESS_ATTACH_IDLE_SECONDS)
    return RuntimeAttachment.objects.filter(session=session, detached_at=None, last_activity_at__gt=idle_since)


def attachment_of(*, scope: Scope, session: Session) -> RuntimeAttachment | None:
    return active_attachments(session=session).filter(user=scope.actor).order_by("-created_at").first()


def interactive_attachment_of(*, scope: Scope, session: Session) -> RuntimeAttachment | None:
    attachment = attachment_of(scope=scope, session=session)
    return attachment if attachment is not None and attachment.mode == AttachMode.INTERACTIVE else None


def events_after(*, session_id: uuid.UUID, cursor: int, limit: int) -> list[SessionEvent]:
    """Events of an already-authorized session with ``seq > cursor``, oldest first."""
    return list(SessionEvent.objects.filter(session_id=session_id, seq__gt=cursor).order_by("seq")[:limit])


def events_before(
    *, session_id: uuid.UUID, before: int | None, limit: int, kind: str | None = None
) -> list[SessionEvent]:
    """The last ``limit`` events of an already-authorized session with ``seq < before`` (all of them when
    ``before`` is None), oldest first: one backwards page, read as a terminal shows its tail."""
    rows = SessionEvent.objects.filter(session_id=session_id)
    if kind is not None:
        rows = rows.filter(kind=kind)
    if before is not None:
        rows = rows.filter(seq__lt=before)
    return list(reversed(rows.order_by("-seq")[:limit]))


# What a session's conversation is made of: the turns, and what happened between them that the next turn
# should know (an approval decided, a hand-off finished, the session ended). Runtime output and the system
# lines a turn writes about itself are not conversation.
CONVERSATION_KINDS = (EventKind.TURN_IN, EventKind.TURN_OUT, EventKind.APPROVAL, EventKind.HANDOFF, EventKind.STATUS)
_DECIDED_APPROVAL = ("approved", "denied", "executed", "failed")
_FINISHED_HANDOFF = ("completed", "failed")


_CONVERSATION_EVENTS = f"""
    SELECT seq, kind, body ->> 'text', body ->> 'status', body ->> 'id', body ->> 'result'
      FROM {SessionEvent._meta.db_table}
     WHERE session_id = %s AND seq > %s::bigint AND seq < %s::bigint
       AND kind IN ('turn.in', 'turn.out', 'approval', 'handoff', 'status')
       AND (kind IN ('turn.in', 'turn.out')
            OR (kind = 'approval' AND body ->> 'status' IN ('approved', 'denied', 'executed', 'failed'))
            OR (kind = 'handoff' AND body ->> 'status' IN ('completed', 'failed'))
            OR (kind = 'status' AND body ->> 'status' <> 'running'))
     ORDER BY seq DESC
     LIMIT %s::int
"""  # noqa: S608 (the table name is the model's)


def _conversation_page(session_id: uuid.UUID, after: int, before: int | None, batch: int) -> list[tuple[int, str, Any]]:
    if connection.vendor == "postgresql":
        # Written as SQL because every answer makes it: the fields a conversation line needs, not whole bodies
        # decoded into model instances (bench/b_prompt.py).
        with rows.hot_cursor() as cursor:
            cursor.execute(_CONVERSATION_EVENTS, [session_id, after, before or 2**63 - 1, batch])
            return [
                (seq, kind, {"text": text, "status": status, "id": id_, "result": result})
                for seq, kind, text, status, id_, result in cursor.fetchall()
            ]
    events = (
        SessionEvent.objects.filter(session_id=session_id, seq__gt=after, kind__in=CONVERSATION_KINDS)
        .filter(
            Q(kind__in=(EventKind.TURN_IN, EventKind.TURN_OUT))
            | Q(kind=EventKind.APPROVAL, body__status__in=_DECIDED_APPROVAL)
            | Q(kind=EventKind.HANDOFF, body__status__in=_FINISHED_HANDOFF)
            | (Q(kind=EventKind.STATUS) & ~Q(body__status="running"))
        )
        .order_by("-seq")
    )
    if before is not None:
        events = events.filter(seq__lt=before)
    return list(events.values_list("seq", "kind", "body")[:batch])


def conversation_events(*, session_id: uuid.UUID, after: int, batch: int = 200) -> Iterator[tuple[int, str, Any]]:
    """``(seq, kind, body)`` of the conversation events of an already-authorized session with ``seq > after``,
    newest first, read lazily in batches (a caller stops once its token budget is full). A body holds at least
    the fields a conversation line reads (``text``, ``status``, ``id``, ``result``)."""
    before: int | None = None
    while True:
        page = _conversation_page(session_id, after, before, batch)
        yield from page
        if len(page) < batch:
            return
        before = page[-1][0]


_LATEST_SUMMARY = f"""
    SELECT {rows.columns(ConversationSummary, "c")}
      FROM {ConversationSummary._meta.db_table} c
     WHERE c.session_id = %s
     ORDER BY c.last_seq DESC
     LIMIT 1
"""  # noqa: S608 (table and column names are the model's)


def conversation_summary_latest(*, session_id: uuid.UUID) -> ConversationSummary | None:
    """The newest summary of an already-authorized session's earlier conversation, if any (as SQL on
    PostgreSQL: every answer reads it)."""
    if connection.vendor != "postgresql":
        return ConversationSummary.objects.filter(session_id=session_id).order_by("-last_seq").first()
    with rows.hot_cursor() as cursor:
        cursor.execute(_LATEST_SUMMARY, [session_id])
        row = cursor.fetchone()
    return rows.instance(ConversationSummary, row) if row is not None else None


_CONVERSATION_HEAD = f"""
    SELECT s.conversation_version, {rows.columns(ConversationSummary, "c")}
      FROM {Session._meta.db_table} s
      LEFT JOIN LATERAL (
           SELECT * FROM {ConversationSummary._meta.db_table} c
            WHERE c.session_id = s.id
            ORDER BY c.last_seq DESC
            LIMIT 1
      ) c ON true
     WHERE s.id = %s
"""  # noqa: S608 (table and column names are the models')


def conversation_head(*, session_id: uuid.UUID) -> tuple[int, ConversationSummary | None]:
    """An already-authorized session's ``conversation_version`` and newest conversation summary, if any, in one
    query (every answer reads them)."""
    if connection.vendor != "postgresql":
        version = Session.objects.filter(pk=session_id).values_list("conversation_version", flat=True).get()
        return version, conversation_summary_latest(session_id=session_id)
    with rows.hot_cursor() as cursor:
        cursor.execute(_CONVERSATION_HEAD, [session_id])
        row = cursor.fetchone()
    if row is None:
        raise NotFound("No such session.")
    summary = rows.instance(ConversationSummary, row[1:]) if row[1] is not None else None
    return int(row[0]), summary


def conversation_summarised_since(*, session_id: uuid.UUID, last_seq: int) -> bool:
    """Whether a summary reaching ``last_seq`` or beyond exists (another turn made it first)."""
    return ConversationSummary.objects.filter(session_id=session_id, last_seq__gte=last_seq).exists()


def turns_running(*, session_id: uuid.UUID) -> list[str]:
    """The ids of an already-authorized session's turns still being answered, oldest first."""
    return list(TurnRun.objects.filter(session_id=session_id).order_by("started_at").values_list("turn_id", flat=True))


def turn_stop_requested(*, turn_id: str) -> bool:
    """Whether a Stop has marked this running turn (the turn's own process asks; no access check)."""
    return TurnRun.objects.filter(pk=turn_id, stop_requested_at__isnull=False).exists()


def turn_out_of(*, session_id: uuid.UUID, turn_id: str) -> dict[str, Any] | None:
    """The written ``turn.out`` body of an already-authorized session's turn, or None (not written, or not its)."""
    found = (
        SessionEvent.objects.filter(session_id=session_id, kind=EventKind.TURN_OUT, body__turn_id=turn_id)
        .values_list("body", flat=True)
        .first()
    )
    return dict(found) if isinstance(found, dict) else None


def session_for_approval(*, session_id: object, tenant_id: int) -> Session | None:
    """The session an approval names, for its approval page: the approval (checked by approvals_app for the
    bound approver) is what grants the approver this view, not the session's own read rule."""
    try:
        pk = _parse_id(session_id)
    except NotFound:
        return None
    return Session.objects.select_related("owner").filter(pk=pk, tenant_id=tenant_id).first()


def bound_runtime_ids(*, instance: str) -> set[str]:
    """Runtime ids on ``instance`` bound to a live Tess session (of any tenant: a binding is exclusive)."""
    return set(
        Session.objects.filter(provider_instance=instance, status="running").values_list("runtime_id", flat=True)
    )


def usage_days_restrict(*, scope: Scope) -> QuerySet[UsageDay]:
    """The usage ledger's day rows the scope may read: a tenant admin's or auditor's whole tenant; anyone
    else's, the rows of the sessions they may see (their own, and those granted to them)."""
    rows = UsageDay.objects.filter(tenant=scope.tenant)
    if scope.actor is None or scope.has_role(Role.ADMIN, Role.AUDITOR):
        return rows
    return rows.filter(session__in=sessions_visible(scope=scope).values("pk"))
