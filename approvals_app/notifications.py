"""Telling a person that something entered their inbox: the drawer's live update, then their chosen channels.

``inbox_entered_on_commit`` pushes the item to the person's ``/ws/me/`` sockets (the drawer's list and count;
the drawer may raise a browser notification from it) and queues ``deliver_inbox_notice``, which sends, each
as the person's ``InboxPreferences`` allow and each best effort (one failing channel neither fails the action
nor stops the others): Web Push to every browser they subscribed, an e-mail, and every registered private
notifier (a Discord direct message, registered by the app that owns Discord). A notice carries the item's
title and its link on ``/inbox/`` only; one-time approval links keep their own private delivery
(``approvals_app.delivery``) and never travel here, least of all through a push service.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from tess_site.errors import InvalidInput
from tess_site.scope import Scope
from tess_site.tasks import enqueue_on_commit

from .events import notify_user_on_commit
from .models import InboxPreferences, PushSubscription

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

CHANNELS = ("browser", "webpush", "email", "discord")

# (user, tenant id, notice {"key", "title", "url"}): tell that person privately; the url is the inbox item's.
InboxNotifier = Callable[["User", int, dict[str, str]], None]

_notifiers: dict[str, InboxNotifier] = {}


def register_inbox_notifier(name: str, notifier: InboxNotifier) -> None:
    """A private channel for inbox notices, named like its ``InboxPreferences`` field (``discord``)."""
    _notifiers[name] = notifier


# --- the events ------------------------------------------------------------------------------------------


def inbox_entered_on_commit(*, tenant_id: int, user_id: int, item: dict[str, Any], notify: bool = True) -> None:
    """``item`` is now in the person's inbox: update their drawer and, with ``notify``, their channels."""
    notify_user_on_commit(
        tenant_id=tenant_id, user_id=user_id, kind="inbox.item", body={**item, "notify": bool(notify)}
    )
    if notify:
        enqueue_on_commit(deliver_inbox_notice, tenant_id, user_id, item["key"], item["title"], item["url"])


def inbox_left_on_commit(*, tenant_id: int, user_id: int, key: str) -> None:
    """The item ``key`` left the person's inbox (decided, expired, no longer waiting)."""
    notify_user_on_commit(tenant_id=tenant_id, user_id=user_id, kind="inbox.left", body={"key": key})


# --- preferences and subscriptions ---------------------------------------------------------------------------


def preferences_of(*, tenant_id: int, user_id: int) -> InboxPreferences:
    """The person's preferences, or the defaults (unsaved) if they never chose."""
    found = InboxPreferences.objects.filter(tenant_id=tenant_id, user_id=user_id).first()
    return found or InboxPreferences(tenant_id=tenant_id, user_id=user_id)


def preferences_get(*, scope: Scope) -> InboxPreferences:
    assert scope.actor is not None
    return preferences_of(tenant_id=scope.tenant.pk, user_id=scope.actor.pk)


def preferences_update(*, scope: Scope, changes: dict[str, bool]) -> InboxPreferences:
    """Set the scope actor's channels in this tenant; keys outside ``CHANNELS`` are refused."""
    if scope.actor is None:
        raise InvalidInput("system scopes have no inbox")
    unknown = sorted(set(changes) - set(CHANNELS))
    if unknown:
        raise InvalidInput("Unknown notification channels.", details={"fields": unknown})
    values = {name: bool(value) for name, value in changes.items()}
    prefs, _ = InboxPreferences.objects.update_or_create(
        tenant=scope.tenant, user=scope.actor, defaults={**values, "updated_at": timezone.now()}
    )
    return prefs


def _b64url_length(value: str) -> int:
    try:
        return len(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (ValueError, TypeError):
        return -1


def push_subscribe(*, scope: Scope, endpoint: str, p256dh: str, auth: str) -> PushSubscription:
    """Store one browser's subscription for the scope's actor (again: refreshed keys, same row)."""
    if scope.actor is None:
        raise InvalidInput("system scopes have no inbox")
    allowed = ("https://", "http://") if settings.TESS_WEBPUSH_ALLOW_HTTP else ("https://",)
    if not endpoint.startswith(allowed) or len(endpoint) > 1000:
        raise InvalidInput("The push endpoint must be an https URL.", details={"field": "endpoint"})
    if _b64url_length(p256dh) != 65:
        raise InvalidInput("p256dh must be an uncompressed P-256 public key.", details={"field": "p256dh"})
    if _b64url_length(auth) != 16:
        raise InvalidInput("auth must be a 16-byte secret.", details={"field": "auth"})
    subscription, _ = PushSubscription.objects.update_or_create(
        tenant=scope.tenant,
        user=scope.actor,
        endpoint=endpoint,
        defaults={"p256dh": p256dh, "auth": auth, "created_at": timezone.now()},
    )
    return subscription


def push_unsubscribe(*, scope: Scope, endpoint: str) -> int:
    if scope.actor is None:
        return 0
    deleted, _ = PushSubscription.objects.filter(tenant=scope.tenant, user=scope.actor, endpoint=endpoint).delete()
    return int(deleted)


def push_subscription_count(*, scope: Scope) -> int:
    if scope.actor is None:
        return 0
    return PushSubscription.objects.filter(tenant=scope.tenant, user=scope.actor).count()


def vapid_public_key() -> str:
    return str(settings.TESS_VAPID_PUBLIC_KEY or "")


# --- delivery ------------------------------------------------------------------------------------------------


def absolute(url: str) -> str:
    base = str(getattr(settings, "TESS_PUBLIC_URL", "") or "").rstrip("/")
    return f"{base}{url}"


def _webpush(subscription: PushSubscription, notice: dict[str, str]) -> None:
    from py_vapid import Vapid02
    from pywebpush import WebPushException, webpush

    private_key = str(settings.TESS_VAPID_PRIVATE_KEY or "")
    if not private_key:
        return
    payload = json.dumps({"title": f"Tess: {notice['title']}", "url": notice["url"], "key": notice["key"]})
    try:
        webpush(
            subscription_info={
                "endpoint": subscription.endpoint,
                "keys": {"p256dh": subscription.p256dh, "auth": subscription.auth},
            },
            data=payload,
            vapid_private_key=Vapid02.from_string(private_key),
            vapid_claims={"sub": settings.TESS_VAPID_SUBJECT},
            ttl=settings.TESS_WEBPUSH_TTL_SECONDS,
            timeout=10,
        )
    except WebPushException as exc:
        status = getattr(exc.response, "status_code", None)
        if status in (404, 410):  # the push service says this subscription is gone for good
            PushSubscription.objects.filter(pk=subscription.pk).delete()
            return
        raise


def _mail(user: User, notice: dict[str, str]) -> None:
    if not user.email:
        return
    send_mail(
        subject=f"Tess: {notice['title']}",
        message=f"{notice['title']}.\n\nOpen your Tess inbox:\n{notice['url']}\n",
        from_email=None,
        recipient_list=[user.email],
    )


def _attempt(name: str, key: str, send: Callable[[], None]) -> None:
    try:
        send()
    except Exception:  # best effort: one failed channel must not stop the others
        logger.exception("inbox notice %s failed for %s", name, key)


def inbox_notice_deliver(*, tenant_id: int, user_id: int, key: str, title: str, url: str) -> None:
    """Send the notice ``title`` with the inbox link ``url`` through the person's chosen channels."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None:
        return
    prefs = preferences_of(tenant_id=tenant_id, user_id=user_id)
    notice = {"key": key, "title": title, "url": absolute(url)}
    if prefs.webpush:
        for subscription in PushSubscription.objects.filter(tenant_id=tenant_id, user_id=user_id):
            _attempt("webpush", key, lambda s=subscription: _webpush(s, notice))  # type: ignore[misc]
    if prefs.email:
        _attempt("email", key, lambda: _mail(user, notice))
    for name, notifier in _notifiers.items():
        if getattr(prefs, name, False):
            _attempt(name, key, lambda n=notifier: n(user, tenant_id, dict(notice)))  # type: ignore[misc]


@shared_task(name="approvals_app.notifications.deliver_inbox_notice", ignore_result=True)
def deliver_inbox_notice(tenant_id: int, user_id: int, key: str, title: str, url: str) -> None:
    inbox_notice_deliver(tenant_id=tenant_id, user_id=user_id, key=key, title=title, url=url)
