from rest_framework import serializers

from ..models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = [
            "seq",
            "actor_label",
            "channel",
            "action",
            "target_type",
            "target_id",
            "outcome",
            "correlation_id",
            "metadata",
            "created_at",
            "prev_hash",
            "hash",
        ]
        read_only_fields = fields
