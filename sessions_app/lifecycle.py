"""Operational memory at lifecycle boundaries (seed 000): a session ended, an approval was executed, a
hand-off completed, a runtime compacted its context.

Each boundary leaves one short record in the session owner's operational memory (redacted by the plugin
before any adapter sees it), and every capture shows in the session's stream as a ``system`` event with
ids only. The capture is written as a ``CaptureItem`` in the boundary's own transaction and delivered
after it commits by a task holding a lease, like the other durable work: a process that dies after the
commit leaves the item to the sweeper, and a failed capture is retried. It never fails the boundary:
memory is an aid, the boundary is the fact.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from memory_app.plugin import operator_memory_plugin
from memory_app.plugin.contract import MemoryRecord
from memory_app.plugin.redaction import redact
from tess_site.accounts.models import Tenant
from tess_site.accounts.selectors import roles_for
from tess_site.context import get_correlation_id
from tess_site.leases import claim, complete, fail, requeue_due
from tess_site.scope import Channel, Scope

from . import stream
from .journal import event_append
from .models import CaptureItem, Session
from .wakeups import DELIVER_CAPTURE_ITEM, wake_on_commit

logger = logging.getLogger(__name__)

MAX_DETAIL_CHARS = 400
CAPTURE_RETRY_SECONDS = 30
CAPTURE_LOST_WAKEUP_SECONDS = 5  # a capture never attempted this long after it was due lost its wake-up


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
    """Capture ``text`` for the session's owner: recorded in the current transaction (the lifecycle change's),
    delivered once it commits."""
    found = Session.objects.filter(pk=session_id).values_list("tenant_id", "owner_id").first()
    if found is None:
        return
    tenant_id, owner_id = found
    _record(tenant_id=tenant_id, user_id=owner_id, session_key=str(session_id), source=source, text=text)


def capture_for_user_on_commit(*, tenant_id: int, user_id: int, session_key: str, source: str, text: str) -> None:
    """Capture ``text`` for ``user_id`` outside any runtime session (an approval executed with none), recorded
    in the current transaction and delivered once it commits. ``session_key`` names the capture's namespace
    (``approval:<id>``); the owner reads it with the rest of their operational memory."""
    _record(tenant_id=tenant_id, user_id=user_id, session_key=session_key, source=source, text=text)


def _record(*, tenant_id: int, user_id: int, session_key: str, source: str, text: str) -> None:
    item = CaptureItem.objects.create(
        tenant_id=tenant_id,
        user_id=user_id,
        session_key=session_key,
        source=source[:64],
        # seed 000: redaction before persistence, the outbox included (the plugin redacts again, to no effect).
        text=redact(text[:MAX_DETAIL_CHARS]).text,
        correlation_id=get_correlation_id()[:64],
    )
    wake_on_commit(DELIVER_CAPTURE_ITEM, item.pk)


def capture_deliver(*, item_id: int, worker: str, retry_in_seconds: int = CAPTURE_RETRY_SECONDS) -> bool:
    """Deliver one capture to its person's operational memory if this worker can claim it; True when this
    call delivered it. The memory service is asked with no transaction open (plast-mem is a network call);
    a failure gives the item back to be retried, until its last attempt. A worker that dies after the
    capture and before completing it leaves the item to be captured again by the next: at least once."""
    item = claim(CaptureItem, pk=item_id, worker=worker)
    if item is None:
        return False
    user = get_user_model().objects.filter(pk=item.user_id, is_active=True).first()
    tenant = Tenant.objects.filter(pk=item.tenant_id).first()
    if user is None or tenant is None:
        with transaction.atomic():
            complete(item, worker=worker)  # nobody to remember it for any more
        return False
    scope = Scope(
        tenant=tenant,
        actor=user,
        channel=Channel.SYSTEM,
        correlation_id=item.correlation_id or "-",
        session=item.session_key,
        roles=roles_for(user=user, tenant=tenant),
    )
    try:
        operator_memory_plugin().capture(scope, source=item.source, text=item.text)
    except Exception as exc:  # memory is an aid: a failed capture is retried, never raised into a boundary
        logger.warning("operational memory capture %s (%s) failed: %s", item.source, item.session_key, exc)
        with transaction.atomic():
            fail(item, worker=worker, error=type(exc).__name__, retry_in_seconds=retry_in_seconds)
        return False
    with transaction.atomic():
        if not complete(item, worker=worker):
            logger.warning("capture %s: lease lost after capturing; the next worker captures it again", item.pk)
            return True
        CaptureItem.objects.filter(pk=item.pk).update(text="")  # memory holds it now: no second copy here
    return True


def wake_capture_item(pk: object) -> None:
    """The lease sweeper's (and the re-queue's) wake-up for a capture item."""
    wake_on_commit(DELIVER_CAPTURE_ITEM, pk)


def capture_requeue_due() -> int:
    """Wake captures left pending: after a failure once due again, and those whose wake-up was lost (the
    process died between the commit and sending it)."""
    return requeue_due(CaptureItem, wake_capture_item, unattempted_grace_seconds=CAPTURE_LOST_WAKEUP_SECONDS)


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
