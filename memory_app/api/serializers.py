from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import serializers

from ..models import OperatorMemory, OperatorMemoryHistory
from ..services import OPS

ROW_FIELDS = [
    "memory_id",
    "category",
    "slot",
    "revision",
    "predecessor_revision",
    "value",
    "ref",
    "source_ref",
    "card_ref",
    "confirmed_at",
    "reauthorized_ref",
    "reauthorized_at",
    "salience",
    "expires_at",
    "updated_at",
    "last_used_at",
]


class MemoryRowSerializer(serializers.ModelSerializer):
    """A current note with all its provenance; ``active`` is false once it has expired."""

    active = serializers.SerializerMethodField()

    class Meta:
        model = OperatorMemory
        fields = [*ROW_FIELDS, "active"]
        read_only_fields = fields

    def get_active(self, row: OperatorMemory) -> bool:
        now = self.context.get("now") or timezone.now()
        return row.expires_at is None or row.expires_at > now


class MemoryHistorySerializer(serializers.ModelSerializer):
    class Meta:
        model = OperatorMemoryHistory
        fields = [*ROW_FIELDS, "successor_revision", "superseded_at"]
        read_only_fields = fields


class CategoryPolicySerializer(serializers.Serializer):
    category = serializers.CharField()
    ceiling = serializers.IntegerField()
    salience = serializers.IntegerField()
    retention_days = serializers.IntegerField(allow_null=True)
    slots = serializers.ListField(child=serializers.CharField(), allow_null=True)


class MemorySnapshotSerializer(serializers.Serializer):
    memory_scope = serializers.ChoiceField(choices=["profile", "session"])
    served = serializers.BooleanField()
    categories = CategoryPolicySerializer(many=True)
    prompt_ceilings = serializers.DictField(child=serializers.IntegerField())
    erasure = serializers.DictField(child=serializers.CharField())
    rows = MemoryRowSerializer(many=True)
    history = MemoryHistorySerializer(many=True)
    invalid_rows = serializers.ListField(child=serializers.DictField())


class MemoryProposalSerializer(serializers.Serializer):
    """A proposed write; the service validates the shape (typed errors), this only checks the types."""

    op = serializers.ChoiceField(choices=OPS)
    category = serializers.CharField(required=False, allow_blank=True, max_length=64)
    slot = serializers.CharField(required=False, allow_blank=True, max_length=128)
    value = serializers.CharField(required=False, allow_blank=True, max_length=4000, trim_whitespace=False)
    ref = serializers.CharField(required=False, allow_blank=True, max_length=200)


class MemoryForgetQuerySerializer(serializers.Serializer):
    category = serializers.CharField(required=False, allow_blank=True, max_length=64)
    slot = serializers.CharField(required=False, allow_blank=True, max_length=128)
    all = serializers.BooleanField(required=False, default=False)


class ForgetResultSerializer(serializers.Serializer):
    outcome = serializers.CharField()
    deleted_count = serializers.IntegerField()
    redacted_count = serializers.IntegerField(
        help_text="Session stream turns, replies and conversation summaries that carried the deleted notes' words "
        'and now read "(forgotten memory request)".'
    )


def row_data(row: OperatorMemory | None) -> dict[str, Any] | None:
    return dict(MemoryRowSerializer(row).data) if row is not None else None
