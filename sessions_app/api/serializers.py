"""Shapes of the sessions API. Nothing provider-specific leaves: runtimes appear as instance + id."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from providers_app.contract import RuntimeNode

from ..models import AgentState, AttachMode, RuntimeAttachment, Session, SessionEvent, SessionMigration


class SessionSerializer(serializers.ModelSerializer[Session]):
    owner = serializers.CharField(source="owner.username", read_only=True)
    provider = serializers.CharField(source="provider_instance", read_only=True)

    class Meta:
        model = Session
        fields = [
            "id",
            "title",
            "status",
            "agent_state",
            "agent_state_since",
            "owner",
            "provider",
            "runtime_id",
            "workspace_key",
            "last_seq",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "agent_state": {
                "help_text": "What the session's agent is doing, as its runtime says (`unknown`: the runtime "
                "cannot tell); every change is also a `status` event of the stream."
            },
            "agent_state_since": {"help_text": "When the agent entered that state (null before the first look)."},
        }


class SessionCreateSerializer(serializers.Serializer[Any]):
    """Start a session on a named instance (its configured command), or — tenant admins — adopt one."""

    provider = serializers.CharField(max_length=64, help_text="name of a configured provider instance")
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    runtime_id = serializers.CharField(max_length=128, required=False, help_text="adopt: the discovered runtime")
    assignee = serializers.CharField(max_length=150, required=False, help_text="adopt: username of the new owner")
    workspace_key = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        default="",
        help_text="start: the repository or workspace the session works on (e.g. acme/payments-api); its answers "
        "then carry that workspace's reviewed project context from plast-mem",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("runtime_id" in attrs) != ("assignee" in attrs):
            raise serializers.ValidationError("Adopting needs both runtime_id and assignee.")
        if "runtime_id" not in attrs and not attrs.get("title"):
            raise serializers.ValidationError({"title": "A new session needs a title."})
        return attrs


class SessionUpdateSerializer(serializers.Serializer[Any]):
    """What a session's owner may change."""

    workspace_key = serializers.CharField(
        max_length=200,
        allow_blank=True,
        help_text="the repository or workspace the session works on (e.g. acme/payments-api); blank: none",
    )


class RuntimeSessionSerializer(serializers.Serializer[Any]):
    provider = serializers.CharField(source="ref.instance")
    runtime_id = serializers.CharField(source="ref.runtime_id")
    title = serializers.CharField()
    status = serializers.CharField()
    created_at = serializers.DateTimeField(allow_null=True)
    last_activity_at = serializers.DateTimeField(allow_null=True)


def node_json(node: RuntimeNode) -> dict[str, Any]:
    return {
        "id": node.id,
        "kind": node.kind,
        "title": node.title,
        "active": node.active,
        "children": [node_json(child) for child in node.children],
    }


class EventSerializer(serializers.ModelSerializer[SessionEvent]):
    body = serializers.JSONField()

    class Meta:
        model = SessionEvent
        fields = ["seq", "kind", "ts", "body"]
        read_only_fields = fields


class SessionListQuerySerializer(serializers.Serializer[Any]):
    """The list's filters; each is optional and they combine (AND)."""

    agent_state = serializers.ChoiceField(
        choices=AgentState.choices, required=False, help_text="only sessions whose agent is in this state"
    )
    provider = serializers.RegexField(
        r"^[A-Za-z0-9_.-]{1,64}$", required=False, help_text="only sessions on this provider instance"
    )
    owned_by = serializers.RegexField(
        r"^[\w.@+-]{1,150}$",
        required=False,
        help_text="only sessions owned by this username (not `owner`: identity fields are refused in requests)",
    )
    q = serializers.CharField(
        min_length=1, max_length=200, required=False, help_text="only sessions whose title contains this (any case)"
    )


class EventsQuerySerializer(serializers.Serializer[Any]):
    """One of three pages: forwards after ``cursor`` (the default, from the start), backwards before
    ``before``, or the last ``tail`` events. Each backwards shape returns its events oldest first."""

    cursor = serializers.IntegerField(min_value=0, required=False)
    before = serializers.IntegerField(min_value=1, required=False)
    tail = serializers.IntegerField(min_value=1, max_value=1000, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=1000, default=100)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = [name for name in ("cursor", "before", "tail") if name in attrs]
        if len(given) > 1:
            raise serializers.ValidationError(f"Give one of cursor, before and tail, not {' and '.join(given)}.")
        return attrs


class MessageSerializer(serializers.Serializer[Any]):
    text = serializers.CharField(max_length=4000, trim_whitespace=False)
    keys = serializers.BooleanField(
        default=False,
        help_text="a terminal's keystrokes, typed exactly as they are (no Enter added); terminals (tmux) only",
    )


class AttachSerializer(serializers.Serializer[Any]):
    mode = serializers.ChoiceField(choices=AttachMode.choices, default=AttachMode.READ_ONLY)


class AttachmentSerializer(serializers.ModelSerializer[RuntimeAttachment]):
    session_id = serializers.UUIDField(read_only=True)
    idle_timeout_seconds = serializers.SerializerMethodField()

    class Meta:
        model = RuntimeAttachment
        fields = ["id", "session_id", "mode", "created_at", "idle_timeout_seconds"]
        read_only_fields = fields

    def get_idle_timeout_seconds(self, obj: RuntimeAttachment) -> int:
        return int(settings.TESS_ATTACH_IDLE_SECONDS)


class TerminateRequestSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500, trim_whitespace=True)


class CutoverSerializer(serializers.Serializer[Any]):
    target = serializers.UUIDField(help_text="id of a running session of yours on another provider instance")


class RollbackSerializer(serializers.Serializer[Any]):
    migration = serializers.IntegerField(
        min_value=1, required=False, help_text="the cutover to roll back (default: the session's newest open one)"
    )


class SessionMigrationSerializer(serializers.ModelSerializer[SessionMigration]):
    source = serializers.UUIDField(source="source_id", read_only=True)  # type: ignore[assignment]
    target = serializers.UUIDField(source="target_id", read_only=True)
    binding_ids = serializers.ListField(child=serializers.IntegerField(), read_only=True)
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    rolled_back_by = serializers.CharField(source="rolled_back_by.username", read_only=True, allow_null=True)

    class Meta:
        model = SessionMigration
        fields = [
            "id",
            "source",
            "target",
            "binding_ids",
            "status",
            "created_by",
            "created_at",
            "rolled_back_by",
            "rolled_back_at",
        ]
        read_only_fields = fields
