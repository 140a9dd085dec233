from __future__ import annotations

from rest_framework import serializers


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=1024, trim_whitespace=False, style={"input_type": "password"})
    tenant_slug = serializers.SlugField(
        max_length=63, required=False, help_text="Needed only when you belong to more than one tenant."
    )
    name = serializers.CharField(max_length=100, required=False, default="cli")
    days = serializers.IntegerField(min_value=1, max_value=366, required=False)


class TokenResponseSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Shown once. Send it as `Authorization: Bearer <token>`.")
    prefix = serializers.CharField()
    tenant_slug = serializers.CharField()
    expires_at = serializers.DateTimeField()


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    tenant_slug = serializers.CharField()
    roles = serializers.ListField(child=serializers.CharField())
    channel = serializers.CharField()
    tenants = serializers.ListField(child=serializers.CharField())


class SelectTenantSerializer(serializers.Serializer):
    slug = serializers.SlugField(max_length=63)
