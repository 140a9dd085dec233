"""The sessions part of a person's inbox: their own sessions whose agent waits for their input.

Registered with approvals_app (``register_inbox_source``) from ``wiring.py``, since approvals_app may not
import this app. It reads ``Session.agent_state``. The session's state writer calls ``announce_waiting`` when a
session starts or stops waiting, inside its transaction, so drawers and notices follow without polling.
"""

from __future__ import annotations

from typing import Any

from approvals_app.inbox_items import session_item
from approvals_app.notifications import inbox_entered_on_commit, inbox_left_on_commit
from tess_site.scope import Scope

from .models import AgentState, Session
from .selectors import sessions_visible


def session_waiting_item(session: Session) -> dict[str, Any]:
    since = session.agent_state_since or session.updated_at
    return session_item(session_id=str(session.id), title=session.title or session.runtime_id, since=since)


def sessions_waiting(scope: Scope) -> list[dict[str, Any]]:
    """The scope actor's own sessions in this tenant that wait for input, newest wait first."""
    if scope.actor is None:
        return []
    waiting = sessions_visible(scope=scope).filter(owner=scope.actor, agent_state=AgentState.WAITING_FOR_INPUT)
    return [session_waiting_item(session) for session in waiting.order_by("-updated_at")[:50]]


def announce_waiting(session: Session, *, waiting: bool) -> None:
    """Tell the owner's inbox, on commit, that ``session`` started (a notice) or stopped waiting for input."""
    if waiting:
        inbox_entered_on_commit(
            tenant_id=session.tenant_id, user_id=session.owner_id, item=session_waiting_item(session)
        )
    else:
        inbox_left_on_commit(tenant_id=session.tenant_id, user_id=session.owner_id, key=f"session_waiting:{session.id}")
