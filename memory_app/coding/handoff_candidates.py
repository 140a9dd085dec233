"""Coding-memory candidates from completed Mos hand-offs (seed 003: reviewed coding memory).

The Mos hand-off protocol's result may carry reusable project facts under ``coding_memory_candidates``: a list
of at most ``MAX_CANDIDATES`` objects shaped like the reviewable part of ``CodingPlastMemBridgeRecordV1``::

    {"workspaceKey": "acme/payments-api", "kind": "pitfall", "statement": "...", "evidence": "...",
     "confidence": "high", "tags": ["tests"], "relatedFiles": ["ledger/tests/test_close.py"],
     "sourceRunId": "run-881"}

``workspaceKey``, ``kind``, ``statement`` and ``evidence`` are required; ``confidence`` defaults to ``medium``;
``sourceRunId`` defaults to the hand-off (``handoff:<id>``). When the hand-off reaches ``completed``, each one
becomes a ``candidate`` entry proposed by the hand-off's requester: never active, never human-verified, until
an approver reviews it. A malformed candidate is skipped (and audited as refused); the result itself stands.
"""

from __future__ import annotations

import logging

from django.db import transaction

from approvals_app.models import Handoff
from tess_site.accounts.selectors import roles_for
from tess_site.audit.services import record_audit
from tess_site.errors import TessError
from tess_site.scope import Channel, Scope

from .services import coding_memory_propose_candidate

logger = logging.getLogger(__name__)

RESULT_FIELD = "coding_memory_candidates"
MAX_CANDIDATES = 10


def _requester_scope(handoff: Handoff) -> Scope:
    return Scope(
        tenant=handoff.tenant,
        actor=handoff.requester,
        channel=Channel.SYSTEM,
        correlation_id=handoff.correlation_id or "-",
        session=handoff.session_id,
        roles=roles_for(user=handoff.requester, tenant=handoff.tenant),
    )


def propose_handoff_candidates(handoff: Handoff) -> None:
    """Hand-off observer (inside the result's transaction): a completed result's candidates, for review."""
    result = handoff.result
    if handoff.status != Handoff.Status.COMPLETED or not isinstance(result, dict):
        return
    candidates = result.get(RESULT_FIELD)
    if not isinstance(candidates, list) or not candidates:
        return
    if handoff.requester is None or not handoff.requester.is_active:
        return
    scope = _requester_scope(handoff)
    for index, candidate in enumerate(candidates[:MAX_CANDIDATES]):
        try:
            if not isinstance(candidate, dict):
                raise TypeError("not an object")
            with transaction.atomic():  # a savepoint: a refused candidate leaves the result and the others
                coding_memory_propose_candidate(
                    scope,
                    workspace_key=str(candidate.get("workspaceKey") or ""),
                    kind=str(candidate.get("kind") or ""),
                    statement=str(candidate.get("statement") or ""),
                    evidence=str(candidate.get("evidence") or ""),
                    confidence=str(candidate.get("confidence") or "medium"),
                    tags=candidate.get("tags"),  # validated (a list of strings) by the service
                    related_files=candidate.get("relatedFiles"),
                    source_run_id=str(candidate.get("sourceRunId") or f"handoff:{handoff.pk}"),
                )
        except (TessError, TypeError) as exc:
            logger.warning("hand-off %s: coding-memory candidate %d refused: %s", handoff.pk, index, exc)
            record_audit(
                scope,
                action="coding_memory.handoff_candidate",
                target_type="handoff",
                target_id=str(handoff.pk),
                outcome="refused",
                metadata={"index": index, "error_code": getattr(exc, "code", "invalid")},
            )
