"""Identity endpoints: exchange a password for a token; who am I; select the browser's tenant."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import Throttled
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from tess_site.errors import Forbidden, InvalidInput, NotFound, TessError
from tess_site.scope import Channel, Scope

from .. import scopes, selectors, services
from ..api_base import ScopedAPIView
from ..limits import FailureLimit
from .serializers import MeSerializer, SelectTenantSerializer, TokenRequestSerializer, TokenResponseSerializer


class InvalidCredentials(TessError):
    code = "invalid_credentials"
    status_code = status.HTTP_401_UNAUTHORIZED
    default_message = "The username or password is wrong."


class TokenExchangeView(APIView):
    """Exchange a username and password for a personal token.

    Rate-limited per client address (``TESS_TOKEN_RATE``, every request), and failed attempts are counted per
    address and per username (the same rate): guessing one account from many addresses stops too.
    """

    # A wrong username or password (the route itself takes no credential).
    error_statuses = {"post": (401,)}

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "token"

    @extend_schema(request=TokenRequestSerializer, responses={201: TokenResponseSerializer}, auth=[])
    def post(self, request: Request) -> Response:
        data = TokenRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        limit = FailureLimit("token", settings.TESS_TOKEN_RATE)
        who = {"address": request.META.get("REMOTE_ADDR", ""), "username": data.validated_data["username"]}
        if limit.blocked(**who):
            raise Throttled(wait=limit.window)
        user = authenticate(request, username=data.validated_data["username"], password=data.validated_data["password"])
        if user is None:
            limit.record_failure(**who)
            raise InvalidCredentials()
        tenants = list(selectors.tenants_for(user=user))
        slug = data.validated_data.get("tenant_slug")
        if slug:
            tenants = [t for t in tenants if t.slug == slug]
        if not tenants:
            raise Forbidden("You are not a member of that tenant." if slug else "You are not a member of any tenant.")
        if len(tenants) > 1:
            raise InvalidInput(
                "You belong to several tenants; name one with tenant_slug.",
                details={"tenant_slugs": [t.slug for t in tenants]},
            )
        tenant = tenants[0]
        scope = Scope(
            tenant=tenant,
            actor=user,
            channel=Channel.CLI,
            correlation_id=request._request.correlation_id,  # type: ignore[attr-defined]
            roles=selectors.roles_for(user=user, tenant=tenant),
        )
        issued = services.token_issue(
            scope=scope, name=data.validated_data["name"], days=data.validated_data.get("days")
        )
        body = TokenResponseSerializer(
            {
                "token": issued.plaintext,
                "prefix": issued.token.prefix,
                "tenant_slug": tenant.slug,
                "expires_at": issued.token.expires_at,
            }
        ).data
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"})


def _me(request: Request, scope: Scope) -> Response:
    return Response(
        MeSerializer(
            {
                "username": scope.actor_label,
                "tenant_slug": scope.tenant.slug,
                "roles": sorted(r.value for r in scope.roles),
                "channel": scope.channel.value,
                "tenants": [t.slug for t in selectors.tenants_for(user=request.user)],
            }
        ).data
    )


class MeView(ScopedAPIView):
    """Who the server says you are, in which tenant, with which roles."""

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        return _me(request, self.scope)


class SelectTenantView(ScopedAPIView):
    """Select the browser session's tenant. Tokens are bound to one tenant and cannot switch."""

    error_statuses = {"post": (404,)}  # a tenant the caller is not a member of

    @extend_schema(request=SelectTenantSerializer, responses=MeSerializer)
    def post(self, request: Request) -> Response:
        if self.scope.channel is not Channel.WEB:
            raise Forbidden("A token belongs to one tenant; make a token for the other tenant instead.")
        data = SelectTenantSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        tenant = selectors.tenant_of_user(user=request.user, slug=data.validated_data["slug"])
        if tenant is None:
            raise NotFound("No such tenant.")
        scopes.select_tenant(session=request.session, tenant=tenant)
        return _me(request, self.scope.with_tenant(tenant, selectors.roles_for(user=request.user, tenant=tenant)))
