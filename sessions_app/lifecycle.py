"""Operational memory at lifecycle boundaries (seed 000): a session ended, an approval was executed, a
hand-off completed, a runtime compacted its context.

Each boundary leaves one short record in the session owner's operational memory (redacted by the plugin
before any adapter sees it), and every capture shows in the session's stream as a ``system`` event with
ids only. Capturing happens after the boundary's transaction commits and never fails it: memory is an
aid, the boundary is the fact.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import transaction

from memory_app.plugin import operator_memory_plugin
from memory_app.plugin.contract import MemoryRecord
from tess_site.accounts.selectors import roles_for
from tess_site.context import get_correlation_id
from tess_site.scope import Channel, Scope

from . import stream
from .journal import event_append
from .models import Session

logger = logging.getLogger(__name__)

MAX_DETAIL_CHARS = 400


def owner_scope(session: Session) -> Scope:
    """The session owner's identity for work Tess does on their behalf at a boundary."""
    return Scope(
        tenant=session.tenant,
        actor=session.owner,
        channel=Channel.SYSTEM,
        correlation_id=get_correlation_id(),
        session=str(session.pk),
        roles=roles_for(user=session.owner, tenant=session.tenant),
    )


def capture_on_commit(*, session_id: uuid.UUID, source: str, text: str) -> None:
    """Capture ``text`` for the session's owner once the current transaction commits."""

    def capture() -> None:
        session = Session.objects.select_related("tenant", "owner").filter(pk=session_id).first()
        if session is None:
            return
        try:
            operator_memory_plugin().capture(owner_scope(session), source=source, text=text[:MAX_DETAIL_CHARS])
        except Exception:
            logger.exception("operational memory capture %s for session %s failed", source, session_id)

    transaction.on_commit(capture)


def capture_for_user_on_commit(*, tenant_id: int, user_id: int, session_key: str, source: str, text: str) -> None:
    """Capture ``text`` for ``user_id`` outside any runtime session (an approval executed with none), once the
    current transaction commits. ``session_key`` names the capture's namespace (``approval:<id>``); the owner
    reads it with the rest of their operational memory."""

    def capture() -> None:
        from django.contrib.auth import get_user_model

        from tess_site.accounts.models import Tenant

        user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
        tenant = Tenant.objects.filter(pk=tenant_id).first()
        if user is None or tenant is None:
            return
        scope = Scope(
            tenant=tenant,
            actor=user,
            channel=Channel.SYSTEM,
            correlation_id=get_correlation_id(),
            session=session_key,
            roles=roles_for(user=user, tenant=tenant),
        )
        try:
            operator_memory_plugin().capture(scope, source=source, text=text[:MAX_DETAIL_CHARS])
        except Exception:
            logger.exception("operational memory capture %s (%s) failed", source, session_key)

    transaction.on_commit(capture)


def post_capture_event(scope: Scope, record: MemoryRecord) -> None:
    """Capture observer: the stream says in words that something was remembered (never the text, no ids)."""
    if not record.namespace.session:
        return
    try:
        session_id = uuid.UUID(record.namespace.session)
    except ValueError:
        return
    if not Session.objects.filter(pk=session_id, tenant=scope.tenant).exists():
        return
    event_append(
        session_id=session_id,
        kind=stream.EventKind.SYSTEM,
        body=stream.system_body(
            text="Tess noted what this session learned for its operational memory.",
            code="memory.captured",
        ),
    )


def ended_text(session: Session, status: str) -> str:
    return f"Session {session.title!r} ({session.provider_instance}:{session.runtime_id}) ended: {status}."


def checkpoint_body(checkpoint: dict[str, Any]) -> stream.SystemBody:
    entry = str(checkpoint.get("entry_id", ""))[:64]
    return stream.system_body(
        text=f"The runtime compacted its context (entry {entry}); checkpoint recorded.", code="checkpoint"
    )


def checkpoint_capture_text(session: Session, checkpoint: dict[str, Any]) -> str:
    summary = str(checkpoint.get("summary", "")).strip()
    return f"Checkpoint of session {session.title!r} after context compaction: {summary}"
