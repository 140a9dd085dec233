"""The interactions endpoint (signature-authenticated) and the link-code API (token or browser session)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from tess_site.accounts.api_base import ScopedAPIView
from tess_site.errors import InvalidInput

from . import services
from .commands import PONG, handle_command
from .signature import verify_request

LINK_CODE_RESPONSE = inline_serializer(
    "DiscordLinkCode", fields={"code": serializers.CharField(), "expires_at": serializers.DateTimeField()}
)


class _RawParser(BaseParser):
    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        return stream.read()


class InteractionsView(APIView):
    """``POST /integrations/discord/interactions/``: identity comes from the signature alone."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    parser_classes = [_RawParser]

    @extend_schema(exclude=True)
    def post(self, request: Request) -> Response:
        raw = request._request.body
        verify_request(
            public_key_hex=settings.TESS_DISCORD_PUBLIC_KEY,
            signature_hex=request.headers.get("X-Signature-Ed25519", ""),
            timestamp=request.headers.get("X-Signature-Timestamp", ""),
            body=raw,
        )
        try:
            interaction = json.loads(raw)
        except ValueError as exc:
            raise InvalidInput("The body is not JSON.") from exc
        if not isinstance(interaction, dict):
            raise InvalidInput("The body must be a JSON object.")
        if interaction.get("type") == 1:
            return Response(PONG)
        if interaction.get("type") != 2:
            raise InvalidInput("Only PING and application commands are handled.")
        correlation_id = request._request.correlation_id  # type: ignore[attr-defined]
        return Response(handle_command(interaction, correlation_id=correlation_id))


class LinkCodesView(ScopedAPIView):
    """Make a one-time code to link a Discord account to you (rate-limited)."""

    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "discord_link"

    @extend_schema(
        request=None,
        responses={201: LINK_CODE_RESPONSE, 429: OpenApiResponse(description="rate limited (error envelope)")},
        description="A one-time code, valid for a few minutes; redeem it in Discord with `/tess link CODE`.",
    )
    def post(self, request: Request) -> Response:
        issued = services.link_code_create(scope=self.scope)
        return Response(
            {"code": issued.code, "expires_at": issued.expires_at},
            status=status.HTTP_201_CREATED,
            headers={"Cache-Control": "no-store"},
        )
