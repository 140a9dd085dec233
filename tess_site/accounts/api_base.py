"""The API view every scoped endpoint stands on: authenticated, tenant-scoped, enveloped errors.

Kept apart from ``permissions``: DRF's ``APIView`` reads the default permission classes (in ``permissions``)
when it is first imported, so that module must not import it.
"""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.views import APIView

from tess_site.scope import Scope

from .permissions import request_scope


class ScopedAPIView(APIView):
    """An API view whose ``scope`` is the verified caller's Scope (permissions have already required one)."""

    @property
    def scope(self) -> Scope:
        scope = request_scope(self.request)
        assert scope is not None, "permission classes must require a tenant member before the view runs"
        return scope


def query_filters(request: Request) -> dict[str, str]:
    """The query string as a plain mapping, for a list view's filter serializer.

    DRF treats a blank value in a QueryDict as an omitted optional field, so ``?status=`` would list
    everything; as a plain mapping the blank reaches the field, which refuses it (400 ``validation_error``)
    as the schema's ``minLength`` says. A repeated name keeps its last value, as ``QueryDict`` does.
    """
    return request.query_params.dict()
