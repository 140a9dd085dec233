"""Permission-aware reads of sessions. Every read of a session starts from ``sessions_visible``.

A session is visible to its owner and to users granted ``view_session`` on it (directly or through a
group), within the scope's tenant; to everyone else it does not exist (404).
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from tess_site.errors import NotFound
from tess_site.scope import Scope

from .models import (
    AttachMode,
    RuntimeAttachment,
    Session,
    SessionEvent,
    SessionGroupObjectPermission,
    SessionUserObjectPermission,
)

VIEW = "view_session"
OPERATE = "operate_session"


def sessions_visible(*, scope: Scope) -> QuerySet[Session]:
    if scope.actor is None:
        return Session.objects.filter(tenant=scope.tenant)
    granted = Q(
        pk__in=SessionUserObjectPermission.objects.filter(user=scope.actor, permission__codename=VIEW).values(
            "content_object_id"
        )
    ) | Q(
        pk__in=SessionGroupObjectPermission.objects.filter(group__user=scope.actor, permission__codename=VIEW).values(
            "content_object_id"
        )
    )
    return Session.objects.filter(Q(owner=scope.actor) | granted, tenant=scope.tenant)


def _parse_id(session_id: object) -> uuid.UUID:
    try:
        return uuid.UUID(str(session_id))
    except ValueError as exc:
        raise NotFound("No such session.") from exc


def access_session(*, scope: Scope, session_id: object) -> Session:
    """The session if the scope may read it; ``NotFound`` otherwise (indistinguishable from absent)."""
    session = sessions_visible(scope=scope).select_related("owner").filter(pk=_parse_id(session_id)).first()
    if session is None:
        raise NotFound("No such session.")
    return session


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


def bound_runtime_ids(*, instance: str) -> set[str]:
    """Runtime ids on ``instance`` bound to a live Tess session (of any tenant: a binding is exclusive)."""
    return set(
        Session.objects.filter(provider_instance=instance, status="running").values_list("runtime_id", flat=True)
    )
