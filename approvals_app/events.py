"""The approvals app's only contact with the channel layer: the per-user group names and pushes."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from tess_site.scope import Scope

logger = logging.getLogger(__name__)


def user_group(*, tenant_id: int, user_id: int) -> str:
    """The group of one person's ``/ws/me/`` sockets in one tenant."""
    return f"me.{tenant_id}.{user_id}"


def notify_user_on_commit(*, tenant_id: int, user_id: int, kind: str, body: dict[str, Any]) -> None:
    """Push ``{kind, body}`` to a person's ``/ws/me/`` sockets once the current transaction commits.

    Bodies carry ids and statuses, never memory text or secrets.
    """

    def push() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async_to_sync(layer.group_send)(
                user_group(tenant_id=tenant_id, user_id=user_id), {"type": "me.event", "kind": kind, "body": body}
            )
        except Exception:  # best effort: the change is committed and readable; a Redis restart must not fail it
            logger.warning("could not push %s to user %s", kind, user_id, exc_info=True)

    transaction.on_commit(push)


def scope_user_group(scope: Scope) -> str:
    assert scope.actor is not None
    return user_group(tenant_id=scope.tenant.pk, user_id=scope.actor.pk)
