"""DRF permissions built on the Scope."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from tess_site.context import get_correlation_id
from tess_site.scope import Role, Scope

from .scopes import scope_for_credential


def request_scope(request: Request) -> Scope | None:
    """The request's Scope, derived once from its verified credential and cached on the request."""
    if not hasattr(request, "_tess_scope"):
        request._tess_scope = scope_for_credential(  # type: ignore[attr-defined]
            user=request.user,
            auth=request.auth,
            session=getattr(request, "session", None),
            correlation_id=getattr(request._request, "correlation_id", None) or get_correlation_id(),
            token_roles=getattr(request._request, "tess_token_roles", None),
        )
    return request._tess_scope  # type: ignore[attr-defined]


class IsTenantMember(BasePermission):
    """Authenticated, and a member of the tenant the credential selects."""

    message = "You are not a member of this tenant."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request_scope(request) is not None


def has_role(*roles: Role) -> type[BasePermission]:
    """A permission class requiring any of ``roles`` in the scope's tenant."""

    class HasRole(IsTenantMember):
        message = f"This needs the {' or '.join(r.value for r in roles)} role."

        def has_permission(self, request: Request, view: Any) -> bool:
            if not super().has_permission(request, view):
                return False
            scope = request_scope(request)
            return scope is not None and scope.has_role(*roles)

    HasRole.__name__ = "HasRole_" + "_".join(r.value for r in roles)
    return HasRole
