"""Delivering one-time approval links, only privately, and notices without them.

A link goes to its own approver only: by e-mail (Django's mail backend; the console in development), to
their ``/ws/me/`` sockets, and through every registered private deliverer (a Discord direct message where a
bot token is configured, registered by the app that owns Discord). Shared places — a Discord channel bound
to the session — get a notice from ``shared_notice`` through the registered shared notifiers, which never
receive a link. Everything here runs after the request's transaction commits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse

from .events import notify_user_on_commit
from .models import Approval

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

# (approval, approver, link url): send the link to that approver only.
PrivateDeliverer = Callable[[Approval, "User", str], None]
# (approval, notice body): post the notice somewhere shared. The body never holds a link or token.
SharedNotifier = Callable[[Approval, dict[str, Any]], None]

_private: dict[str, PrivateDeliverer] = {}
_shared: dict[str, SharedNotifier] = {}


def register_private_deliverer(name: str, deliverer: PrivateDeliverer) -> None:
    _private[name] = deliverer


def register_shared_notifier(name: str, notifier: SharedNotifier) -> None:
    _shared[name] = notifier


def link_url(token: str) -> str:
    base = str(getattr(settings, "TESS_PUBLIC_URL", "") or "").rstrip("/")
    return f"{base}{reverse('approvals:page', kwargs={'token': token})}"


def shared_notice(approval: Approval) -> dict[str, Any]:
    """What a shared channel may say about a request: what and whose, and that approvers were asked privately."""
    return {
        "id": str(approval.id),
        "status": str(approval.status),
        "action": approval.action,
        "target_type": approval.target_type,
        "target_id": approval.target_id,
        "session_id": approval.session_id,
        "text": (
            f"Approval requested for {approval.action} on {approval.target_type} {approval.target_id}. "
            "The approvers were sent a private link."
        ),
    }


def _mail(approval: Approval, approver: User, url: str) -> None:
    if not approver.email:
        return
    requester = approval.requester.get_username()
    send_mail(
        subject=f"Tess: approval needed for {approval.action} on {approval.target_type} {approval.target_id}",
        message=(
            f"{requester} asks for approval to run {approval.action} on {approval.target_type} "
            f"{approval.target_id}.\n\nReason: {approval.reason or '(none given)'}\n"
            f"Expires: {approval.expires_at.isoformat()}\n\n"
            f"Open your one-time link (it is yours only; do not forward it):\n{url}\n"
        ),
        from_email=None,
        recipient_list=[approver.email],
    )


def _deliver(approval_id: Any, links: list[tuple[int, str]]) -> None:
    from django.contrib.auth import get_user_model

    approval = Approval.objects.select_related("requester").get(pk=approval_id)
    users = get_user_model().objects.in_bulk([user_id for user_id, _ in links])
    for user_id, url in links:
        approver = users[user_id]
        for name, deliverer in [("email", _mail), *_private.items()]:
            try:
                deliverer(approval, approver, url)
            except Exception:  # one failed channel must not stop the others
                logger.exception("approval link delivery %s failed for approval %s", name, approval_id)
    notice = shared_notice(approval)
    for name, notifier in _shared.items():
        try:
            notifier(approval, dict(notice))
        except Exception:
            logger.exception("approval notice %s failed for approval %s", name, approval_id)


def deliver_links_on_commit(approval: Approval, tokens: list[tuple[User, str]]) -> None:
    """Send each approver their own link, and shared places a notice, once the request commits."""
    links = [(approver.pk, link_url(token)) for approver, token in tokens]
    for user_id, url in links:
        notify_user_on_commit(
            tenant_id=approval.tenant_id,
            user_id=user_id,
            kind="approval.link",
            body={"id": str(approval.id), "action": approval.action, "url": url},
        )
    transaction.on_commit(partial(_deliver, approval.pk, links))
