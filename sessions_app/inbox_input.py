"""Raw input queued for a session's runtime: one durable inbox item, its audit row, and the wake-up that
delivers it after commit. The direct path (``services.session_message``) and input an approver released
from a budget's hold (``over_budget``) queue it the same way."""

from __future__ import annotations

import uuid
from typing import Any

from tess_site.audit.services import record_audit
from tess_site.scope import Scope

from .models import InboxItem, Session
from .wakeups import DELIVER_INBOX_ITEM, wake_on_commit


def input_queue(
    scope: Scope,
    session: Session,
    *,
    created_by_id: int,
    channel: str,
    correlation_id: str,
    text: str,
    keys: bool,
    metadata: dict[str, Any] | None = None,
) -> InboxItem:
    """Queue ``text`` (keystrokes when ``keys``) for ``session``; call inside the caller's transaction."""
    item = InboxItem.objects.create(
        session=session,
        created_by_id=created_by_id,
        channel=channel,
        correlation_id=correlation_id[:64],
        text=text,
        keys=keys,
        provider_key=uuid.uuid4().hex,
    )
    record_audit(
        scope,
        action="session.message",
        target_type="session",
        target_id=str(session.pk),
        outcome="queued",
        metadata={"inbox_id": item.pk, "chars": len(text), "keys": keys, **(metadata or {})},
    )
    wake_on_commit(DELIVER_INBOX_ITEM, item.pk)
    return item
