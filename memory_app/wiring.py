"""Everything memory_app registers at start-up, in one place (called from ``AppConfig.ready``)."""

from __future__ import annotations

from approvals_app.cards import register_card_handler
from approvals_app.handoffs import register_handoff_observer

from .cards import MemoryCardHandler
from .coding import tasks as coding_tasks  # noqa: F401  (registers the ingestion task with Celery)
from .coding.handoff_candidates import propose_handoff_candidates
from .plugin.orm import OrmAdapter
from .plugin.plastmem import PlastMemAdapter
from .plugin.registry import register_operator_memory_adapter
from .services import CARD_KIND


def connect() -> None:
    register_card_handler(CARD_KIND, MemoryCardHandler())
    register_operator_memory_adapter(OrmAdapter.kind, OrmAdapter)
    register_operator_memory_adapter(PlastMemAdapter.kind, PlastMemAdapter)
    # seed 003: reusable project facts in a completed Mos hand-off's result become candidates for human review.
    register_handoff_observer(propose_handoff_candidates)
