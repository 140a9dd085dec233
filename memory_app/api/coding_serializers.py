"""Serializers of reviewed coding memory and operational memory over the API."""

from __future__ import annotations

from rest_framework import serializers

from ..coding.models import CodingMemoryEntry, CodingMemoryReview


class CodingMemoryReviewSerializer(serializers.ModelSerializer):
    reviewer = serializers.CharField(source="reviewer.get_username", read_only=True)

    class Meta:
        model = CodingMemoryReview
        fields = ["id", "action", "reviewer", "rationale", "at"]


class CodingMemoryEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = CodingMemoryEntry
        fields = [
            "id", "workspace_key", "kind", "statement", "evidence", "confidence", "tags", "related_files",
            "source_run_id", "origin", "status", "human_verified", "reviewer", "review_rationale", "reviewed_at",
            "review_request", "created_at", "updated_at",
        ]  # fmt: skip


class CodingMemoryDetailSerializer(CodingMemoryEntrySerializer):
    reviews = CodingMemoryReviewSerializer(many=True, read_only=True)

    class Meta(CodingMemoryEntrySerializer.Meta):
        fields = [*CodingMemoryEntrySerializer.Meta.fields, "reviews"]


class CodingMemoryWriteSerializer(serializers.Serializer):
    workspace_key = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(choices=CodingMemoryEntry.Kind.choices)
    statement = serializers.CharField(max_length=1000)
    evidence = serializers.CharField(max_length=4000)
    confidence = serializers.ChoiceField(choices=CodingMemoryEntry.Confidence.choices, default="medium")
    tags = serializers.ListField(child=serializers.CharField(max_length=200), required=False, max_length=32)
    related_files = serializers.ListField(child=serializers.CharField(max_length=200), required=False, max_length=32)
    source_run_id = serializers.CharField(max_length=100, required=False, allow_blank=True)


class RationaleSerializer(serializers.Serializer):
    rationale = serializers.CharField(max_length=2000)


class ReviewRequestSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class CodingMemoryListQuerySerializer(serializers.Serializer):
    workspace = serializers.CharField(max_length=200, required=False)
    status = serializers.ChoiceField(choices=CodingMemoryEntry.Status.choices, required=False)


class ExportQuerySerializer(serializers.Serializer):
    workspace = serializers.CharField(max_length=200)


class OperationalQuerySerializer(serializers.Serializer):
    q = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    limit = serializers.IntegerField(min_value=1, max_value=50, default=20)
