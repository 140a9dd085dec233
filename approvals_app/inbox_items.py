"""The items of a person's inbox, one shape for every kind, and the registry of sources from other apps.

An item says what waits on the person and where to act on it (``url``: the item on ``/inbox/``); it carries
ids, names and statuses, never a one-time approval link or a person's note text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.urls import reverse

from tess_site.scope import Scope

from .models import Approval, Card

# The kinds, in the order the inbox lists them.
KINDS = ("approval_to_decide", "session_waiting", "card", "budget", "approval_requested")

# (scope) -> the items of that kind the scope's actor has; read through the source app's own selectors.
InboxSource = Callable[[Scope], list[dict[str, Any]]]

_sources: dict[str, InboxSource] = {}


def register_inbox_source(name: str, source: InboxSource) -> None:
    """Add items owned by a higher app (sessions waiting for input) to every inbox. Called from ``wiring.py``."""
    _sources[name] = source


def inbox_sources() -> list[InboxSource]:
    return list(_sources.values())


def inbox_url(key: str) -> str:
    return f"{reverse('inbox:page')}#{key}"


def item(*, kind: str, key: str, object_id: str, title: str, since: Any, **extra: Any) -> dict[str, Any]:
    return {
        "key": key,
        "kind": kind,
        "id": object_id,
        "title": title,
        "since": since.isoformat() if hasattr(since, "isoformat") else since,
        "url": inbox_url(key),
        **extra,
    }


def approval_item(approval: Approval, *, kind: str) -> dict[str, Any]:
    verb = "Approve" if kind == "approval_to_decide" else "Waiting for approval of"
    return item(
        kind=kind,
        key=f"{kind}:{approval.id}",
        object_id=str(approval.id),
        title=f"{verb} {approval.action} on {approval.target_type} {approval.target_id}",
        since=approval.created_at,
        expires_at=approval.expires_at.isoformat(),
        action=approval.action,
        target_type=approval.target_type,
        target_id=approval.target_id,
        session_id=approval.session_id,
        requester=approval.requester.get_username(),
    )


CARD_TITLES = {"memory": "Confirm a memory change"}


def card_item(card: Card) -> dict[str, Any]:
    return item(
        kind="card",
        key=f"card:{card.id}",
        object_id=str(card.id),
        title=CARD_TITLES.get(card.kind, f"Confirm a {card.kind} card"),
        since=card.created_at,
        card_kind=card.kind,
        session_id=card.session_id,
    )


def session_item(*, session_id: str, title: str, since: Any) -> dict[str, Any]:
    """What a registered source returns for one of the person's sessions that waits for their input."""
    return item(
        kind="session_waiting",
        key=f"session_waiting:{session_id}",
        object_id=session_id,
        title=f"Session {title} waits for your input",
        since=since,
        session_id=session_id,
    )
