"""Thin views of the sessions API: parse, call one service or selector, shape the answer."""

from __future__ import annotations

import dataclasses
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from approvals_app.api.approval_serializers import ApprovalSerializer
from approvals_app.models import Approval
from providers_app.registry import get_provider
from tess_site.accounts.api_base import ScopedAPIView, query_filters
from tess_site.api_schema import PROVIDER_ERRORS, list_schema
from tess_site.errors import InvalidInput

from .. import bindings, cutover, selectors, services
from ..board import BoardFilters, session_usage, sessions_filtered
from ..idempotency import IDEMPOTENCY_PARAMETER, KeyHold, idempotent, idempotent_in_steps
from ..models import AttachMode, Session
from ..stream import SCHEMA_DESCRIPTION
from ..workspace import session_workspace_set
from .serializers import (
    AttachmentSerializer,
    AttachSerializer,
    CutoverSerializer,
    EventSerializer,
    EventsQuerySerializer,
    MessageSerializer,
    RollbackSerializer,
    RuntimeSessionSerializer,
    SessionCreateSerializer,
    SessionListQuerySerializer,
    SessionMigrationSerializer,
    SessionSerializer,
    SessionUpdateSerializer,
    TerminateRequestSerializer,
    node_json,
)

LIST_LIMIT = 200
# The screen answer, described for the schema only: its fields `source` and `data` would shadow a
# serializer's own attributes, so the view answers the dict as it is.
SCREEN = inline_serializer(
    name="Screen",
    fields={
        "session_id": serializers.UUIDField(),
        "seq": serializers.IntegerField(help_text="the session's last seq when the screen was read"),
        "source": serializers.CharField(
            help_text="the stream source shown (a tmux pane); output of others is not on it"
        ),
        "cursor": serializers.CharField(
            help_text="the stream cursor of `source` already on this screen: draw only output after it on top"
        ),
        "cols": serializers.IntegerField(),
        "rows": serializers.IntegerField(),
        "cursor_x": serializers.IntegerField(help_text="0-based column of the cursor"),
        "cursor_y": serializers.IntegerField(help_text="0-based row of the cursor"),
        "alternate": serializers.BooleanField(help_text="the alternate screen (a full-screen program's) is shown"),
        "data": serializers.CharField(
            help_text="escape sequences that redraw this screen on a terminal of cols by rows, colours included"
        ),
    },
)


class SessionListView(ScopedAPIView):
    idempotency: KeyHold
    error_statuses = {"post": PROVIDER_ERRORS}

    @extend_schema(
        parameters=[SessionListQuerySerializer],
        responses=list_schema(SessionSerializer),
        description="Your sessions and those granted to you, newest first (at most 200), optionally filtered. "
        "A malformed filter (an unknown `agent_state`, a `provider` or `owned_by` that is no valid name, a `q` "
        "over 200 characters) answers 400 `validation_error`.",
    )
    def get(self, request: Request) -> Response:
        query = SessionListQuerySerializer(data=query_filters(request))
        query.is_valid(raise_exception=True)
        given = dict(query.validated_data)
        given["owner"] = given.pop("owned_by", "")
        sessions = sessions_filtered(selectors.sessions_listed(scope=self.scope), BoardFilters(**given))
        return Response({"results": SessionSerializer(sessions[:LIST_LIMIT], many=True).data})

    @extend_schema(
        request=SessionCreateSerializer,
        responses={201: SessionSerializer},
        parameters=[IDEMPOTENCY_PARAMETER],
        description=(
            "Start a runtime session on a named provider instance with that instance's configured command "
            "(a client never supplies a command), or — tenant admins — adopt a discovered runtime session "
            "for an `assignee` by naming its `runtime_id`.\n\n" + SCHEMA_DESCRIPTION
        ),
    )
    @idempotent_in_steps
    def post(self, request: Request) -> Response:
        data = SessionCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values: dict[str, Any] = data.validated_data
        if "runtime_id" in values:
            session = services.session_adopt(
                scope=self.scope,
                instance=values["provider"],
                runtime_id=values["runtime_id"],
                assignee=values["assignee"],
                title=values["title"],
                finish=self._created,
                workspace_key=values["workspace_key"],
            )
        else:
            session = services.session_start(
                scope=self.scope,
                instance=values["provider"],
                title=values["title"],
                finish=self._created,
                workspace_key=values["workspace_key"],
            )
        return Response(SessionSerializer(session).data, status=status.HTTP_201_CREATED)

    def _created(self, session: Session) -> None:
        self.idempotency.finish(status.HTTP_201_CREATED, SessionSerializer(session).data)


class DiscoveredView(ScopedAPIView):
    error_statuses = {"get": PROVIDER_ERRORS}

    @extend_schema(
        responses=list_schema(RuntimeSessionSerializer),
        description="Tenant admins: runtime sessions on the provider instances that no Tess session binds.",
    )
    def get(self, request: Request) -> Response:
        found = services.runtime_discovered(scope=self.scope)
        return Response({"results": RuntimeSessionSerializer(found, many=True).data})


class SessionDetailView(ScopedAPIView):
    @extend_schema(
        responses=SessionSerializer,
        description="The session, the caller's `attachment` and its `usage`: `agent` (its runtime's own steps: "
        "`text` such as `1.20 USD`, or `unknown` for a runtime that reports none, never 0; `tokens`, `steps`) and "
        "`tess` (Tess's own model turns in it, or null).",
    )
    def get(self, request: Request, session_id: str) -> Response:
        session = selectors.access_session(scope=self.scope, session_id=session_id)
        body = dict(SessionSerializer(session).data)
        attachment = selectors.attachment_of(scope=self.scope, session=session)
        body["attachment"] = AttachmentSerializer(attachment).data if attachment is not None else None
        body["usage"] = session_usage(session=session)
        return Response(body)

    @extend_schema(
        request=SessionUpdateSerializer,
        responses=SessionSerializer,
        description="The session's owner names the workspace it works on (blank clears it); audited as "
        "`session.workspace_set`. Others who may read the session get 403; anyone else 404.",
    )
    def patch(self, request: Request, session_id: str) -> Response:
        data = SessionUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        session = session_workspace_set(
            scope=self.scope, session_id=session_id, workspace_key=data.validated_data["workspace_key"]
        )
        return Response(SessionSerializer(session).data)


class SessionTreeView(ScopedAPIView):
    error_statuses = {"get": PROVIDER_ERRORS}

    @extend_schema(
        responses=inline_serializer(
            name="SessionTree",
            fields={
                "session_id": serializers.UUIDField(),
                "nodes": serializers.ListField(child=serializers.DictField()),
            },
        ),
        description="The runtime's tree (for tmux: session → windows → panes), normalized.",
    )
    def get(self, request: Request, session_id: str) -> Response:
        session = selectors.access_session(scope=self.scope, session_id=session_id)
        nodes = get_provider(session.provider_instance).get_session_tree(self.scope, session.runtime_ref)
        return Response({"session_id": str(session.pk), "nodes": [node_json(n) for n in nodes]})


class SessionEventsView(ScopedAPIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "cursor", int, description="forwards: events with seq greater than this (default 0, the start)"
            ),
            OpenApiParameter(
                "before",
                int,
                description="backwards: the last `limit` events with seq less than this, oldest first; pass the "
                "answer's `prev_cursor` to page further back",
            ),
            OpenApiParameter(
                "tail",
                int,
                description="the last `tail` events (1-1000), oldest first: a stream opened at its end; follow on "
                "from `next_cursor` (as `?cursor=` or the websocket's `cursor`)",
            ),
            OpenApiParameter("limit", int, description="at most this many (1-1000, default 100); not with tail"),
        ],
        responses=inline_serializer(
            name="EventPage",
            fields={
                "events": EventSerializer(many=True),
                "next_cursor": serializers.IntegerField(help_text="pass as ?cursor= to continue forwards"),
                "prev_cursor": serializers.IntegerField(
                    allow_null=True,
                    help_text="pass as ?before= for the page before this one; null when nothing is older",
                ),
                "last_seq": serializers.IntegerField(help_text="the session's latest sequence number"),
            },
        ),
        description="At most one of `cursor`, `before` and `tail` (400 `validation_error` otherwise). Sessions you "
        "may not read answer 404, whatever the page.\n\n" + SCHEMA_DESCRIPTION,
    )
    def get(self, request: Request, session_id: str) -> Response:
        session = selectors.access_session(scope=self.scope, session_id=session_id)
        query = EventsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        values = query.validated_data
        if "tail" in values or "before" in values:
            before = values.get("before")
            limit = values.get("tail") or values["limit"]
            rows = selectors.events_before(session_id=session.pk, before=before, limit=limit)
            cursor = rows[-1].seq if rows else (before - 1 if before is not None else session.last_seq)
        else:
            cursor = values.get("cursor", 0)
            rows = selectors.events_after(session_id=session.pk, cursor=cursor, limit=values["limit"])
            cursor = rows[-1].seq if rows else cursor
        first = rows[0].seq if rows else None
        return Response(
            {
                "events": EventSerializer(rows, many=True).data,
                "next_cursor": cursor,
                "prev_cursor": first if first is not None and first > 1 else None,
                "last_seq": session.last_seq,
            }
        )


class SessionScreenView(ScopedAPIView):
    error_statuses = {"get": PROVIDER_ERRORS}

    @extend_schema(
        responses=SCREEN,
        description="What the session's terminal shows now (tmux: the active pane, colours, cursor and the "
        "alternate screen included), for whoever may read its stream. A viewer opened at the stream's tail "
        "draws this first, then the output of `source` after `cursor`. A runtime without a screen (pi, Hermes, "
        "Matrix) answers 501 `capability_unsupported`, an ended session 409; sessions you may not read 404.",
    )
    def get(self, request: Request, session_id: str) -> Response:
        session, screen = services.session_screen(scope=self.scope, session_id=session_id)
        return Response({"session_id": str(session.pk), "seq": session.last_seq, **dataclasses.asdict(screen)})


class SessionMessagesView(ScopedAPIView):
    error_statuses = {"post": PROVIDER_ERRORS}

    @extend_schema(
        request=MessageSerializer,
        responses={
            202: inline_serializer(
                name="MessageQueued",
                fields={
                    "inbox_id": serializers.IntegerField(allow_null=True),
                    "state": serializers.CharField(),
                    "approval": serializers.DictField(required=False),
                },
            )
        },
        parameters=[IDEMPOTENCY_PARAMETER],
        description="Raw input to the runtime (keys into tmux), queued and delivered by a worker, once per "
        "`Idempotency-Key`: `text` is typed, then Enter; with `keys: true` it is typed exactly as it is (a "
        "terminal's keystrokes; terminals only, `capability_unsupported` otherwise). Needs an interactive "
        "attachment (`interactive_attachment_required` otherwise). While a `require_approval` budget of the session "
        "has reached its limit, the input is held in an approval request (`state: awaiting_approval`, `approval`) "
        "and delivered once approved.",
    )
    @idempotent
    def post(self, request: Request, session_id: str) -> Response:
        data = MessageSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        item = services.message_enqueue(
            scope=self.scope, session_id=session_id, text=values["text"], keys=values["keys"]
        )
        if isinstance(item, Approval):  # held: a require_approval budget reached its limit
            held = {"id": str(item.pk), "status": item.status, "expires_at": item.expires_at.isoformat()}
            return Response({"inbox_id": None, "state": "awaiting_approval", "approval": held}, status=202)
        return Response({"inbox_id": item.pk, "state": item.state}, status=status.HTTP_202_ACCEPTED)


class SessionAttachView(ScopedAPIView):
    idempotency: KeyHold
    error_statuses = {"post": PROVIDER_ERRORS}

    @extend_schema(
        request=AttachSerializer,
        responses=AttachmentSerializer,
        parameters=[IDEMPOTENCY_PARAMETER],
        description="Attach `read_only` (the default) or `interactive`; an attachment ends on detach or "
        "after `TESS_ATTACH_IDLE_SECONDS` without input.",
    )
    @idempotent_in_steps
    def post(self, request: Request, session_id: str) -> Response:
        data = AttachSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        attachment = services.session_attach(
            scope=self.scope,
            session_id=session_id,
            mode=AttachMode(data.validated_data["mode"]),
            finish=lambda done: self.idempotency.finish(status.HTTP_200_OK, AttachmentSerializer(done).data),
        )
        return Response(AttachmentSerializer(attachment).data)


class SessionDetachView(ScopedAPIView):
    idempotency: KeyHold
    error_statuses = {"post": PROVIDER_ERRORS}

    @extend_schema(
        request=None,
        responses=inline_serializer(
            name="Detached", fields={"detached": serializers.IntegerField(help_text="how many attachments ended")}
        ),
        parameters=[IDEMPOTENCY_PARAMETER],
    )
    @idempotent_in_steps
    def post(self, request: Request, session_id: str) -> Response:
        ended = services.session_detach(
            scope=self.scope,
            session_id=session_id,
            finish=lambda done: self.idempotency.finish(status.HTTP_200_OK, {"detached": done}),
        )
        return Response({"detached": ended})


class SessionTerminateView(ScopedAPIView):
    error_statuses = {"post": PROVIDER_ERRORS}

    @extend_schema(
        request=TerminateRequestSerializer,
        responses={202: ApprovalSerializer},
        parameters=[IDEMPOTENCY_PARAMETER],
        description="Ask to terminate the runtime session: 202 with the pending approval for exactly this "
        "session and action. The tenant's approvers get one-time links; once one approves, the session is "
        "terminated exactly once and its stream shows the `approval` and `status` events. A session whose "
        "provider instance cannot terminate gets 501 `capability_unsupported` (details name the capability and "
        "the instance) before any approver is asked.",
    )
    @idempotent
    def post(self, request: Request, session_id: str) -> Response:
        body = TerminateRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        approval = services.session_terminate(
            scope=self.scope, session_id=session_id, reason=body.validated_data.get("reason", "")
        )
        return Response(ApprovalSerializer(approval).data, status=status.HTTP_202_ACCEPTED)


class SessionCutoverView(ScopedAPIView):
    error_statuses = {"post": PROVIDER_ERRORS}

    @extend_schema(
        request=CutoverSerializer,
        responses={201: SessionMigrationSerializer},
        parameters=[IDEMPOTENCY_PARAMETER],
        description="Move every active ingress binding of this session (web, CLI, Discord channel) to `target`, a "
        "running session of the same tenant on another provider instance. The caller owns both or is a tenant "
        "admin. Both streams get a `system` event; the move is audited and can be rolled back.",
    )
    @idempotent
    def post(self, request: Request, session_id: str) -> Response:
        body = CutoverSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        migration = cutover.session_cutover(
            scope=self.scope, session_id=session_id, target_id=body.validated_data["target"]
        )
        return Response(SessionMigrationSerializer(migration).data, status=status.HTTP_201_CREATED)


class SessionRollbackView(ScopedAPIView):
    error_statuses = {"post": PROVIDER_ERRORS}

    @extend_schema(
        request=RollbackSerializer,
        responses=SessionMigrationSerializer,
        parameters=[IDEMPOTENCY_PARAMETER],
        description="Move the bindings of this session's newest open cutover (or of `migration`) back here: "
        "exactly those bindings, none other. 409 `rollback_bindings_moved_on` when one was moved on since.",
    )
    @idempotent
    def post(self, request: Request, session_id: str) -> Response:
        body = RollbackSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        migration = cutover.session_rollback(
            scope=self.scope, session_id=session_id, migration_id=body.validated_data.get("migration")
        )
        return Response(SessionMigrationSerializer(migration).data)


class SessionBindView(ScopedAPIView):
    @extend_schema(
        request=None,
        responses=inline_serializer(
            name="ClientBinding",
            fields={
                "session_id": serializers.UUIDField(help_text="the session to use: this one, or where it moved"),
                "expires_at": serializers.DateTimeField(help_text="the binding lapses then unless used again"),
                "followed": inline_serializer(
                    name="FollowedMove",
                    fields={"from": serializers.UUIDField(), "migration": serializers.IntegerField()},
                    allow_null=True,
                    help_text="set when a cutover moved this client from the session named to `session_id`",
                ),
            },
        ),
        description="Bind the caller's CLI profile (its token) or browser session to this session as it uses "
        "it; the binding lapses `TESS_CLIENT_BINDING_SECONDS` after its last use. A cutover moves live "
        "bindings; if one moved this client away from the session named, the answer is the session it is on "
        "now (`followed`), and the binding stays there.",
    )
    def post(self, request: Request, session_id: str) -> Response:
        token = request.auth
        ref = bindings.client_ref(
            scope=self.scope,
            token_id=getattr(token, "pk", None) if token is not None else None,
            session_key=request.session.session_key if token is None else None,
        )
        if ref is None:
            raise InvalidInput("Only a browser session or a CLI token binds this way.")
        bound = bindings.client_bind(scope=self.scope, session_id=session_id, ref=ref)
        return Response(bound.describe())


class SessionMigrationsView(ScopedAPIView):
    @extend_schema(
        responses=list_schema(SessionMigrationSerializer),
        description="Cutovers from and to this session, newest first.",
    )
    def get(self, request: Request, session_id: str) -> Response:
        rows = cutover.migrations_list(scope=self.scope, session_id=session_id)
        return Response({"results": SessionMigrationSerializer(rows, many=True).data})
