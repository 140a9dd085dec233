"""Recall at the prompt boundary: bounded, ordered, labelled, re-grounded, and the only read that marks use."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from memory_app.models import MemorySwitch, OperatorMemory
from memory_app.policy import RECALL_MAX_CHARS
from memory_app.recall import PREAMBLE
from memory_app.selectors import memory_snapshot
from memory_app.services import memory_scope_for, recall_for_prompt
from tests.conftest import scope_of


@pytest.fixture
def owner_scope(cast):
    return scope_of(cast.owner, cast.acme)


def test_nothing_remembered_gives_an_empty_block_and_zero(cast, owner_scope):
    recall = recall_for_prompt(owner_scope)

    assert (recall.block, recall.recalled_count, recall.memory_scope) == ("", 0, "profile")


def test_at_most_eight_active_notes_by_salience_then_recency(cast, remember, audit_ref):
    for i in range(10):
        remember(f"preference {i}")
    remember("pinned thing", category="pinned_contexts", ref=audit_ref)
    remember("Phase 5", category="standing_initiative")
    OperatorMemory.objects.filter(value="preference 3").update(reauthorized_at=timezone.now() + timedelta(seconds=5))

    recall = recall_for_prompt(scope_of(cast.owner, cast.acme))  # with the auditor role audit_ref granted

    lines = [line for line in recall.block.splitlines() if line.startswith("- ")]
    assert recall.recalled_count == 8 == len(lines)
    assert "Phase 5" in lines[0] and "pinned thing" in lines[1] and "preference 3" in lines[2]
    assert lines[3:] == [f"- [preference, fallible] preference {i}" for i in (9, 8, 7, 6, 5)]


def test_the_block_labels_every_note_fallible_and_states_precedence(cast, owner_scope, remember):
    remember("lead with sev0")

    block = recall_for_prompt(owner_scope).block

    assert block.startswith(PREAMBLE)
    for phrase in (
        "security and system policy",
        "authoritative state from authorized live tools",
        "live instruction",
        "Preferences are presentation guidance",
        "re-grounded",
        "stale, conflicting or inapplicable",
    ):
        assert phrase in block
    assert "- [preference, fallible] lead with sev0" in block


def test_the_block_never_passes_4096_characters(cast, owner_scope, remember):
    for i in range(8):
        remember(f"{i} " + "x" * 270)

    recall = recall_for_prompt(owner_scope)

    assert len(recall.block) <= RECALL_MAX_CHARS
    assert recall.recalled_count == recall.block.count("- [preference")


def test_expired_notes_are_left_out_but_stay_visible(cast, owner_scope, remember):
    remember("Phase 5", category="standing_initiative")
    OperatorMemory.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    assert recall_for_prompt(owner_scope).recalled_count == 0
    assert [row.value for row in memory_snapshot(scope=owner_scope).rows] == ["Phase 5"]


def test_only_recalled_rows_get_their_last_use_advanced(cast, owner_scope, remember):
    for i in range(9):
        remember(f"preference {i}")

    recall_for_prompt(owner_scope)

    used = OperatorMemory.objects.filter(last_used_at__isnull=False).count()
    assert used == 8
    assert OperatorMemory.objects.get(value="preference 0").last_used_at is None


def test_inspection_never_advances_last_use(cast, owner_scope, remember, api_as, browser_as):
    remember("lead with sev0")

    memory_snapshot(scope=owner_scope)
    api_as(cast.owner).get("/api/v1/memory/")
    browser_as(cast.owner).get("/memory/")

    assert OperatorMemory.objects.get().last_used_at is None


def test_a_pin_that_no_longer_resolves_is_skipped(cast, owner_scope, remember, audit_ref):
    from tess_site.accounts.models import Membership

    remember("pinned thing", category="pinned_contexts", ref=audit_ref)
    remember("lead with sev0")
    Membership.objects.filter(user=cast.owner, role="auditor").delete()  # the audit row is no longer readable

    recall = recall_for_prompt(scope_of(cast.owner, cast.acme))

    assert recall.recalled_count == 1 and "pinned thing" not in recall.block
    assert OperatorMemory.objects.get(category="pinned_contexts").last_used_at is None


def test_a_row_failing_validation_is_reported_and_left_out(cast, owner_scope, remember, caplog):
    remember("lead with sev0")
    remember("skip the intro")
    OperatorMemory.objects.filter(value="skip the intro").update(canonical="tampered")

    with caplog.at_level(logging.ERROR, logger="memory_app.selectors"):
        recall = recall_for_prompt(owner_scope)

    assert recall.recalled_count == 1 and "intro" not in recall.block
    assert "canonical_mismatch" in caplog.text
    snapshot = memory_snapshot(scope=owner_scope)
    assert [bad["problem"] for bad in snapshot.invalid] == ["canonical_mismatch"]


def test_history_is_never_a_recall_source(cast, owner_scope, remember, confirm_write):
    remember("lead with sev0", slot="lead")
    confirm_write("correct", category="preferences", slot="lead", value="lead with sev1")

    block = recall_for_prompt(owner_scope).block

    assert "sev1" in block and "sev0" not in block


def test_recall_is_only_ever_for_the_operator_who_sent_the_turn(cast, remember, confirm_write):
    remember("owner note")
    confirm_write("remember", user=cast.teammate, category="preferences", value="teammate note")

    block = recall_for_prompt(scope_of(cast.teammate, cast.acme)).block

    assert "teammate note" in block and "owner note" not in block


@override_settings(TESS_OPERATOR_MEMORY=False)
def test_the_environment_switch_turns_recall_off_with_session_scope(cast, owner_scope):
    recall = recall_for_prompt(owner_scope)

    assert (recall.block, recall.recalled_count, recall.memory_scope) == ("", 0, "session")
    assert memory_scope_for(owner_scope) == "session"


def test_the_runtime_switch_turns_recall_off_without_a_restart(cast, owner_scope, remember):
    remember("lead with sev0")
    MemorySwitch.objects.create(enabled=False)

    recall = recall_for_prompt(owner_scope)

    assert (recall.recalled_count, recall.memory_scope) == (0, "session")
    assert OperatorMemory.objects.get().last_used_at is None


def test_a_member_without_the_operator_role_gets_session_scope(cast):
    assert memory_scope_for(scope_of(cast.approver, cast.acme)) == "session"
    assert memory_scope_for(scope_of(cast.owner, cast.acme)) == "profile"


def test_a_database_error_in_recall_is_loud_and_retryable_never_an_empty_memory(cast, owner_scope, remember):
    from unittest import mock

    from django.db import OperationalError

    from memory_app.errors import MemoryUnavailable

    remember("lead with sev0")

    with (
        mock.patch("memory_app.recall._load", side_effect=OperationalError("gone")),
        pytest.raises(MemoryUnavailable) as failed,
    ):
        recall_for_prompt(owner_scope)

    assert failed.value.status_code == 503 and failed.value.retry_after_seconds > 0


def test_reauthorizing_an_old_note_makes_it_recent_again(cast, owner_scope, remember, confirm_write):
    for i in range(9):
        remember(f"preference {i}", slot=f"p{i}")
    OperatorMemory.objects.filter(slot="p0").update(reauthorized_at=timezone.now() - timedelta(days=1))
    assert "preference 0" not in recall_for_prompt(owner_scope).block

    confirm_write("reauthorize", category="preferences", slot="p0")

    lines = recall_for_prompt(owner_scope).block.splitlines()
    assert "- [preference, fallible] preference 0" in lines
    assert "- [preference, fallible] preference 1" not in lines


def test_last_use_is_kept_to_its_resolution_so_every_turn_does_not_rewrite_the_notes(cast, owner_scope, remember):
    remember("a note recalled turn after turn")
    recall_for_prompt(owner_scope)
    first = OperatorMemory.objects.get().last_used_at
    assert first is not None

    recall_for_prompt(owner_scope)  # within TESS_MEMORY_LAST_USE_SECONDS of the last mark: left as it is
    assert OperatorMemory.objects.get().last_used_at == first

    earlier = first - timedelta(seconds=61)
    OperatorMemory.objects.update(last_used_at=earlier)
    recall_for_prompt(owner_scope)  # older than the resolution: recall marks it again
    assert OperatorMemory.objects.get().last_used_at > first

    with override_settings(TESS_MEMORY_LAST_USE_SECONDS=0):
        marked = OperatorMemory.objects.get().last_used_at
        recall_for_prompt(owner_scope)
        assert OperatorMemory.objects.get().last_used_at > marked
