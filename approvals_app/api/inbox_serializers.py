"""The inbox over the API: its items, the notification settings, Web Push subscriptions."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ..models import InboxPreferences


class InboxItemSerializer(serializers.Serializer[Any]):
    key = serializers.CharField(help_text="Stable id of the item: '<kind>:<id>'.")
    kind = serializers.ChoiceField(
        choices=["approval_to_decide", "session_waiting", "card", "approval_requested"],
        help_text="approval_to_decide: you may decide it (POST /approvals/{id}/open/ for your link); "
        "approval_requested: you asked (POST /approvals/{id}/resend/); card: confirm or dismiss it; "
        "session_waiting: one of your sessions waits for your input.",
    )
    id = serializers.CharField(help_text="The approval's, card's or session's id.")
    title = serializers.CharField()
    since = serializers.DateTimeField()
    url = serializers.CharField(help_text="The item on /inbox/ (never a one-time approval link).")
    expires_at = serializers.DateTimeField(required=False)
    action = serializers.CharField(required=False)
    target_type = serializers.CharField(required=False)
    target_id = serializers.CharField(required=False)
    requester = serializers.CharField(required=False)
    card_kind = serializers.CharField(required=False)
    session_id = serializers.CharField(required=False, allow_null=True)


class InboxSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    results = InboxItemSerializer(many=True)


class ApprovalOpenSerializer(serializers.Serializer[Any]):
    url = serializers.CharField(
        help_text="Your own fresh one-time link to the approval page; your older unused link stopped working."
    )


class ApprovalResendSerializer(serializers.Serializer[Any]):
    sent = serializers.IntegerField(help_text="How many approvers were sent a fresh link, privately.")


class InboxPreferencesSerializer(serializers.ModelSerializer[InboxPreferences]):
    class Meta:
        model = InboxPreferences
        fields = ["browser", "webpush", "email", "discord"]


class PushKeysSerializer(serializers.Serializer[Any]):
    p256dh = serializers.CharField(max_length=128, help_text="base64url, the browser's P-256 public key.")
    auth = serializers.CharField(max_length=64, help_text="base64url, the 16-byte authentication secret.")


class PushSubscriptionSerializer(serializers.Serializer[Any]):
    """A browser's ``PushSubscription.toJSON()``."""

    endpoint = serializers.CharField(max_length=1000)
    keys = PushKeysSerializer()


class PushUnsubscribeSerializer(serializers.Serializer[Any]):
    endpoint = serializers.CharField(max_length=1000)


class PushStateSerializer(serializers.Serializer[Any]):
    vapid_public_key = serializers.CharField(help_text="The server's VAPID public key; empty if Web Push is off.")
    subscriptions = serializers.IntegerField(help_text="How many of your browsers are subscribed in this tenant.")
