"""Base classes every API view stands on: authenticated, tenant-scoped, enveloped errors."""

from __future__ import annotations

from rest_framework.views import APIView

from tess_site.accounts.permissions import request_scope
from tess_site.scope import Scope


class ScopedAPIView(APIView):
    """An API view whose ``scope`` is the verified caller's Scope (permissions have already required one)."""

    @property
    def scope(self) -> Scope:
        scope = request_scope(self.request)
        assert scope is not None, "permission classes must require a tenant member before the view runs"
        return scope
