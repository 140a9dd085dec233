"""``GET /api/v1/usage/``: the usage ledger grouped by day, operator, provider instance, model or session."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from tess_site.accounts.api_base import ScopedAPIView, query_filters

from ..usage import GROUPS, usage_grouped


class UsageQuerySerializer(serializers.Serializer[Any]):
    group_by = serializers.ChoiceField(choices=sorted(GROUPS), default="day", help_text="what each row sums up")
    since = serializers.DateField(required=False, help_text="the first day (UTC, YYYY-MM-DD) to include")
    until = serializers.DateField(required=False, help_text="the last day (UTC, YYYY-MM-DD) to include")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("since") and attrs.get("until") and attrs["until"] < attrs["since"]:
            raise serializers.ValidationError({"until": "must not be before since"})
        return attrs


class UsageRowSerializer(serializers.Serializer[Any]):
    group = serializers.CharField(help_text="the day (YYYY-MM-DD), username, provider instance, model or session id")
    currency = serializers.CharField(allow_null=True, help_text="null for steps with no cost")
    steps = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField()
    cache_write_tokens = serializers.IntegerField()
    cost = serializers.CharField(allow_null=True, help_text="a decimal string; null when no step had a cost")
    unpriced_steps = serializers.IntegerField(help_text="steps with tokens and no price: not counted as zero")


class UsageSerializer(serializers.Serializer[Any]):
    group_by = serializers.CharField()
    results = UsageRowSerializer(many=True)


class UsageView(ScopedAPIView):
    """The usage you may read (tenant admins and auditors: the tenant's; everyone else: their own sessions'
    and those granted to them), summed per group and currency. A source that reports no usage has no rows:
    its sessions' usage is unknown, never zero."""

    @extend_schema(parameters=[UsageQuerySerializer], responses=UsageSerializer)
    def get(self, request: Request) -> Response:
        query = UsageQuerySerializer(data=query_filters(request))
        query.is_valid(raise_exception=True)
        given = query.validated_data
        rows = usage_grouped(
            scope=self.scope, group_by=given["group_by"], since=given.get("since"), until=given.get("until")
        )
        return Response({"group_by": given["group_by"], "results": rows})
