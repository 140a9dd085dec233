"""Approval requests over the API: read-only."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ..approvals import display_status
from ..models import Approval


class ApprovalSerializer(serializers.ModelSerializer[Approval]):
    status = serializers.SerializerMethodField()
    requester = serializers.CharField(source="requester.username", read_only=True)
    decided_by = serializers.CharField(source="decided_by.username", read_only=True, default=None, allow_null=True)
    may_decide = serializers.SerializerMethodField()

    class Meta:
        model = Approval
        fields = [
            "id",
            "action",
            "target_type",
            "target_id",
            "parameters",
            "session_id",
            "reason",
            "status",
            "execution",
            "requester",
            "created_at",
            "expires_at",
            "decided_by",
            "decided_at",
            "decision_reason",
            "executed_at",
            "result",
            "may_decide",
        ]
        read_only_fields = fields

    def get_status(self, obj: Approval) -> str:
        return display_status(obj)

    def get_may_decide(self, obj: Approval) -> bool:
        """True while the caller holds an unused link to this pending, unexpired request."""
        return bool(getattr(obj, "may_decide", False)) and display_status(obj) == Approval.Status.PENDING


class ApprovalListQuerySerializer(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=[s.value for s in Approval.Status], required=False)
    session_id = serializers.UUIDField(required=False, help_text="only the approvals about this session")
