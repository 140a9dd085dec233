"""The copilot turn over REST: a thin view that hands the request's scope and text to the gateway.

The view holds no transaction while the turn runs (``@idempotent_in_steps``, ``gateway.turn_handle``).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from tess_site.accounts.api_base import ScopedAPIView
from tess_site.api_schema import PROVIDER_ERRORS

from ..gateway import MAX_TURN_CHARS, turn_handle
from ..idempotency import IDEMPOTENCY_PARAMETER, KeyHold, idempotent_in_steps
from ..stream import SCHEMA_DESCRIPTION


class TurnSerializer(serializers.Serializer[Any]):
    text = serializers.CharField(max_length=MAX_TURN_CHARS, trim_whitespace=False)


TURN_DESCRIPTION = """
A turn is a conversation with Tess (not raw input to the runtime). The gateway decides what it may do from
your text before any model runs: conversation, status (from the runtime, live) and safe diagnostics are
answered; `remember …`, `forget …`, `correct …` park a memory card you confirm later; asking to terminate
the session requests a one-time approval; coding work (`fix`, `implement`, `review`, `merge`, …) becomes a
Mos hand-off; anything Tess does not support is refused with `intent_unsupported` (422) naming why, and the
turn stays in the stream.

200: `{"turn_id", "intent", "reply", "memory": {"scope", "recalled_count", "grounded"}, "cards",
"approvals", "handoffs", "events"}`; a refusal answers with the error envelope whose `details.turn` holds
the same body. `turn.in` and `turn.out` (and any `card`, `approval`, `handoff`, `system` events) appear
in the session stream for every bound channel.
"""


class SessionTurnsView(ScopedAPIView):
    idempotency: KeyHold
    error_statuses = {"post": PROVIDER_ERRORS}

    @extend_schema(
        request=TurnSerializer,
        responses={
            200: OpenApiResponse(description="the turn: reply, memory, cards, approvals, hand-offs, events"),
            422: OpenApiResponse(description="recorded and refused: the error envelope, the turn in details.turn"),
        },
        parameters=[IDEMPOTENCY_PARAMETER],
        description=TURN_DESCRIPTION.strip() + "\n\n" + SCHEMA_DESCRIPTION,
    )
    @idempotent_in_steps
    def post(self, request: Request, session_id: str) -> Response:
        data = TurnSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = turn_handle(
            scope=self.scope,
            session_id=session_id,
            text=data.validated_data["text"],
            # The stored outcome commits with the turn's events: a key is never done for a turn not written.
            finish=lambda done: self.idempotency.finish(done.http_status, done.body()),
        )
        return Response(result.body(), status=result.http_status)
