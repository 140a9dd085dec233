"""The memory card handler, registered with approvals_app in ``MemoryConfig.ready()``."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from approvals_app.cards import CardApplied, Unavailable
from approvals_app.models import Card
from tess_site.errors import TessError
from tess_site.scope import Scope

from .api.serializers import row_data
from .services import KEPT_ON_DECIDED, memory_apply


class MemoryCardHandler:
    def apply(self, scope: Scope, card: Card) -> CardApplied:
        """The server's result: ``{outcome, deleted_count, redacted_count, row, error}``; a refusal is an
        outcome too."""
        try:
            with transaction.atomic():
                outcome = memory_apply(scope, card)
        except Unavailable:
            raise
        except TessError as exc:
            error = {"code": exc.code, "message": exc.message, "details": exc.details}
            refused = {"outcome": "refused", "deleted_count": 0, "redacted_count": 0, "row": None}
            return CardApplied(response={**refused, "error": error}, stored={**refused, "error": {"code": exc.code}})
        row = outcome.row
        ids = (
            {"memory_id": str(row.memory_id), "revision": row.revision, "category": row.category, "slot": row.slot}
            if row is not None
            else None
        )
        common = {
            "outcome": outcome.outcome,
            "deleted_count": outcome.deleted_count,
            "redacted_count": outcome.redacted_count,
            "error": None,
        }
        return CardApplied(response={**common, "row": row_data(row)}, stored={**common, "row": ids})

    def scrub(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {key: payload[key] for key in KEPT_ON_DECIDED if key in payload}
