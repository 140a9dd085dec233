from rest_framework import serializers

from ..models import Card


class CardSerializer(serializers.ModelSerializer):
    class Meta:
        model = Card
        fields = [
            "id",
            "kind",
            "status",
            "payload",
            "outcome",
            "session_id",
            "correlation_id",
            "created_at",
            "decided_at",
        ]
        read_only_fields = fields


class CardListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=Card.Status.choices, required=False)
    kind = serializers.CharField(max_length=32, required=False)
    session_id = serializers.UUIDField(required=False, help_text="only the cards parked in this session")


class CardDecisionSerializer(serializers.Serializer):
    """A decided card and the server's result of deciding it (what every surface shows)."""

    outcome = serializers.CharField()
    card = CardSerializer()
