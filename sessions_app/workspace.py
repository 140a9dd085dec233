"""A session's workspace key (seed 003: "coding task goal + workspace key + relevant files → plast-mem
context_pre_retrieve"): which repository's reviewed project context its answers may carry.

It is set when the session is started (``POST /api/v1/sessions/`` with ``workspace_key``) or later by the
session's owner (``PATCH /api/v1/sessions/{id}/``); every change is audited with the old and the new key.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from memory_app.coding.services import check_workspace_key
from tess_site.audit.services import record_audit
from tess_site.errors import Forbidden
from tess_site.scope import Scope

from . import events, selectors
from .models import Session


def check_session_workspace(raw: object) -> str:
    """A workspace key as sessions keep it: blank (none) or a valid key (``acme/payments-api``)."""
    if raw is None or str(raw).strip() == "":
        return ""
    return check_workspace_key(raw)


def session_workspace_set(*, scope: Scope, session_id: object, workspace_key: object) -> Session:
    """The owner names (or, with a blank key, clears) the workspace of their session; audited."""
    key = check_session_workspace(workspace_key)
    with transaction.atomic():
        session = selectors.access_session(scope=scope, session_id=session_id)
        if scope.actor is None or session.owner_id != scope.actor.pk:
            raise Forbidden("Only the session's owner sets its workspace.")
        session = Session.objects.select_for_update().get(pk=session.pk)
        before = session.workspace_key
        if before == key:
            return session
        session.workspace_key = key
        session.updated_at = timezone.now()
        session.save(update_fields=["workspace_key", "updated_at"])
        record_audit(
            scope,
            action="session.workspace_set",
            target_type="session",
            target_id=str(session.pk),
            outcome="ok",
            metadata={"workspace_key": key or None, "previous": before or None},
        )
        events.board_changed_on_commit(tenant_id=session.tenant_id, session_id=session.pk)
    return session
