"""The inbox over the API: what waits on you, a fresh approval link of your own, resend, notification settings.

``POST /approvals/{id}/open/`` returns the link in the response to its own approver only; it is never pushed
anywhere shared.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from tess_site.accounts.api_base import ScopedAPIView

from ..links import approval_link_open, approval_resend
from ..notifications import (
    preferences_get,
    preferences_update,
    push_subscribe,
    push_subscription_count,
    push_unsubscribe,
    vapid_public_key,
)
from ..waiting import inbox_of
from .inbox_serializers import (
    ApprovalOpenSerializer,
    ApprovalResendSerializer,
    InboxPreferencesSerializer,
    InboxSerializer,
    PushStateSerializer,
    PushSubscriptionSerializer,
    PushUnsubscribeSerializer,
)


class InboxView(ScopedAPIView):
    """Everything waiting on you in this tenant: approvals you may decide, your sessions waiting for input,
    your pending cards, and the approvals you requested that are still pending."""

    @extend_schema(responses=InboxSerializer)
    def get(self, request: Request) -> Response:
        items = inbox_of(scope=self.scope)
        return Response({"count": len(items), "results": items})


class ApprovalOpenView(ScopedAPIView):
    """Mint a fresh one-time link to a pending approval you may decide, bound to you; your older unused link
    to it stops working. 404 for an approval you may not decide; 409 once decided; 410 once expired."""

    error_statuses = {"post": (409, 410)}

    @extend_schema(request=None, responses=ApprovalOpenSerializer)
    def post(self, request: Request, approval_id: str) -> Response:
        return Response({"url": approval_link_open(self.scope, approval_id=approval_id)})


class ApprovalResendView(ScopedAPIView):
    """Send every approver of your pending request a fresh link through their private channels (e-mail,
    Discord direct message, their drawer); it enters their inbox again. 404 unless you requested it; 429 within
    30 seconds of the last resend."""

    error_statuses = {"post": (409, 410, 429)}

    @extend_schema(request=None, responses=ApprovalResendSerializer)
    def post(self, request: Request, approval_id: str) -> Response:
        return Response({"sent": approval_resend(self.scope, approval_id=approval_id)})


class InboxSettingsView(ScopedAPIView):
    """Which channels tell you that something entered your inbox (the drawer's live update is always on)."""

    @extend_schema(responses=InboxPreferencesSerializer)
    def get(self, request: Request) -> Response:
        return Response(InboxPreferencesSerializer(preferences_get(scope=self.scope)).data)

    @extend_schema(request=InboxPreferencesSerializer, responses=InboxPreferencesSerializer)
    def put(self, request: Request) -> Response:
        body = InboxPreferencesSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        prefs = preferences_update(scope=self.scope, changes=dict(body.validated_data))
        return Response(InboxPreferencesSerializer(prefs).data)


class PushSubscriptionView(ScopedAPIView):
    """Web Push: the server's VAPID public key, and subscribing or unsubscribing one of your browsers."""

    @extend_schema(responses=PushStateSerializer)
    def get(self, request: Request) -> Response:
        return Response(
            {"vapid_public_key": vapid_public_key(), "subscriptions": push_subscription_count(scope=self.scope)}
        )

    @extend_schema(request=PushSubscriptionSerializer, responses={201: PushStateSerializer})
    def post(self, request: Request) -> Response:
        body = PushSubscriptionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        push_subscribe(
            scope=self.scope, endpoint=data["endpoint"], p256dh=data["keys"]["p256dh"], auth=data["keys"]["auth"]
        )
        state = {"vapid_public_key": vapid_public_key(), "subscriptions": push_subscription_count(scope=self.scope)}
        return Response(state, status=status.HTTP_201_CREATED)

    @extend_schema(request=PushUnsubscribeSerializer, responses=PushStateSerializer)
    def delete(self, request: Request) -> Response:
        body = PushUnsubscribeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        push_unsubscribe(scope=self.scope, endpoint=body.validated_data["endpoint"])
        return Response(
            {"vapid_public_key": vapid_public_key(), "subscriptions": push_subscription_count(scope=self.scope)}
        )
