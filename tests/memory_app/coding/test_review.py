"""Candidates, reviews and who may activate: only a human approver or admin, never a model-reachable path."""

from __future__ import annotations

import pytest

from memory_app.coding.models import CodingMemoryEntry, CodingMemoryReview
from memory_app.coding.services import (
    CodingMemoryNotFound,
    InvalidTransition,
    ReviewerRequired,
    coding_memory_apply,
    coding_memory_propose_candidate,
    coding_memory_reject,
    coding_memory_request_review,
    coding_memory_retire,
    coding_memory_write,
)
from tess_site.errors import Forbidden, InvalidInput
from tess_site.scope import Channel, Scope
from tests.conftest import scope_of

from .conftest import WORKSPACE

pytestmark = pytest.mark.django_db


def test_a_handoff_result_only_ever_makes_a_candidate(cast, candidate):
    entry = candidate()
    assert entry.status == CodingMemoryEntry.Status.CANDIDATE
    assert entry.human_verified is False
    assert entry.origin == "handoff"
    assert entry.reviewed_at is None


def test_a_system_scope_can_propose_but_never_activate(cast, candidate):
    system = Scope(tenant=cast.acme, actor=None, channel=Channel.SYSTEM, correlation_id="handoff-9")
    entry = coding_memory_propose_candidate(
        system, workspace_key=WORKSPACE, kind="fact", statement="CI uses Python 3.11", evidence="ci.yml line 4"
    )
    assert entry.status == "candidate"
    with pytest.raises(ReviewerRequired):
        coding_memory_apply(system, entry_id=entry.pk, rationale="model says so")


def test_candidates_are_redacted(candidate):
    entry = candidate(evidence="log showed token=abcdef123456 for jane@example.com")
    assert "abcdef123456" not in entry.evidence
    assert "jane@example.com" not in entry.evidence


def test_an_approver_activates_with_review_metadata(cast, candidate):
    entry = candidate()
    request = coding_memory_request_review(scope_of(cast.owner, cast.acme), entry_id=entry.pk, note="please check")
    entry = coding_memory_apply(scope_of(cast.approver, cast.acme), entry_id=entry.pk, rationale="verified on run 881")
    assert entry.status == "active"
    assert entry.human_verified is True
    assert entry.reviewer == "approver"
    assert entry.review_rationale == "verified on run 881"
    assert entry.reviewed_at is not None
    assert entry.review_request_id == request.pk
    assert list(entry.reviews.values_list("action", flat=True).order_by("at")) == ["request", "apply"]


def test_an_admin_may_activate(cast, candidate):
    entry = coding_memory_apply(scope_of(cast.admin_user, cast.acme), entry_id=candidate().pk, rationale="ok")
    assert entry.status == "active"


@pytest.mark.parametrize("who", ["owner", "teammate", "auditor"])
def test_it_refuses_activation_without_the_reviewer_role(cast, candidate, who):
    entry = candidate()
    with pytest.raises(ReviewerRequired):
        coding_memory_apply(scope_of(getattr(cast, who), cast.acme), entry_id=entry.pk, rationale="looks right")
    entry.refresh_from_db()
    assert entry.status == "candidate"


def test_it_refuses_other_tenants(cast, candidate):
    entry = candidate()
    with pytest.raises(CodingMemoryNotFound):
        coding_memory_apply(scope_of(cast.outsider, cast.globex), entry_id=entry.pk, rationale="mine now")


def test_reject_and_retire(cast, candidate, active):
    approver = scope_of(cast.approver, cast.acme)
    rejected = coding_memory_reject(approver, entry_id=candidate().pk, rationale="not reproducible")
    assert rejected.status == "rejected"
    assert rejected.human_verified is False
    retired = coding_memory_retire(approver, entry_id=active().pk, rationale="fixed upstream")
    assert retired.status == "retired"
    with pytest.raises(InvalidTransition):
        coding_memory_apply(approver, entry_id=rejected.pk, rationale="changed my mind")
    assert CodingMemoryReview.objects.filter(action="reject").count() == 1


def test_a_review_needs_a_rationale(cast, candidate):
    with pytest.raises(InvalidInput):
        coding_memory_apply(scope_of(cast.approver, cast.acme), entry_id=candidate().pk, rationale="  ")


def test_an_auditor_cannot_write_candidates(cast):
    with pytest.raises(Forbidden):
        coding_memory_write(
            scope_of(cast.auditor, cast.acme),
            data={"workspace_key": WORKSPACE, "kind": "fact", "statement": "s", "evidence": "e"},
        )


def test_a_bad_workspace_key_is_refused(candidate):
    with pytest.raises(InvalidInput):
        candidate(workspace_key="../etc/passwd")
