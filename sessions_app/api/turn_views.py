"""The copilot turn over REST: a thin view that hands the request's scope and text to the gateway.

The view holds no transaction while the turn runs (``@idempotent_in_steps``, ``gateway.turn_handle``).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from tess_site.accounts.api_base import ScopedAPIView
from tess_site.api_schema import PROVIDER_ERRORS

from ..gateway import MAX_TURN_CHARS, turn_handle
from ..idempotency import IDEMPOTENCY_PARAMETER, KeyHold, idempotent_in_steps
from ..stream import SCHEMA_DESCRIPTION
from ..turn_stop import turn_stop


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
"approvals", "handoffs", "events", "stopped"}` (`stopped`: the turn was stopped while Tess answered, and
`reply` is the text shown by then; a replay of the same `Idempotency-Key` answers the same); a refusal
answers with the error envelope whose `details.turn` holds the same body. `turn.in` and `turn.out` (and any
`card`, `approval`, `handoff`, `system` events) appear in the session stream for every bound channel.
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


STOP_DESCRIPTION = """
Stop a turn while Tess answers it, from any node: the model call is closed, and the turn is written as
stopped (its `turn.out` carries `"stopped": true` and the text shown so far; its own request answers with
`"stopped": true`), which frees the input. The `turn_id` is the one in the turn's `turn.delta` frames (the
first, empty, comes as soon as the turn is accepted) or in its answer.

Needs the operator role and the session's owner or an operate grant (403); a session you cannot see is 404,
as is a turn that is neither running nor written in it. A Stop that changes nothing says so, with 200:
`status` is `stopping` (this request stopped it), `already_stopping` (an earlier Stop is ending it),
`already_stopped` (it was written as stopped) or `already_finished` (it was written whole before the Stop).
"""

StopAnswer = inline_serializer(
    "TurnStop",
    fields={
        "turn_id": serializers.CharField(),
        "status": serializers.ChoiceField(
            choices=["stopping", "already_stopping", "already_stopped", "already_finished"]
        ),
        "detail": serializers.CharField(),
    },
)


class SessionTurnStopView(ScopedAPIView):
    error_statuses = {"post": (403, 404)}

    @extend_schema(request=None, responses={200: StopAnswer}, description=STOP_DESCRIPTION.strip())
    def post(self, request: Request, session_id: str, turn_id: str) -> Response:
        outcome = turn_stop(scope=self.scope, session_id=session_id, turn_id=turn_id)
        return Response(outcome.body())
