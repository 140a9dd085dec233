"""The write rules of seed 002, through the real confirm bridge (propose a card, confirm it)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals_app.models import Card
from memory_app.models import OperatorMemory, OperatorMemoryHistory
from memory_app.services import memory_propose
from tess_site import refs
from tess_site.audit.models import AuditEvent
from tests.conftest import scope_of

from .conftest import rows_of


def test_a_remembered_note_gets_a_memory_id_revision_one_and_matching_provenance(cast, remember):
    result = remember("lead with sev0", slot="lead")

    row = OperatorMemory.objects.get(operator=cast.owner)
    assert result["outcome"] == "created"
    assert result["row"]["memory_id"] == str(row.memory_id)
    assert (row.revision, row.predecessor_revision, row.value, row.salience, row.expires_at) == (
        1,
        None,
        "lead with sev0",
        50,
        None,
    )
    assert row.card_ref == row.reauthorized_ref
    assert row.confirmed_at == row.reauthorized_at
    assert row.source_ref == "channel:web"


def test_nothing_is_remembered_until_the_card_is_confirmed(cast):
    card = memory_propose(
        scope_of(cast.owner, cast.acme), data={"op": "remember", "category": "preferences", "value": "x y"}
    )

    assert card.status == Card.Status.PENDING
    assert not OperatorMemory.objects.exists()


def test_values_are_stored_verbatim(cast, remember):
    remember("  Lead   with SEV0\tplease ")

    assert OperatorMemory.objects.get().value == "  Lead   with SEV0\tplease "


def test_remembering_the_same_content_in_the_same_slot_is_a_reauthorization(cast, remember, confirm_write):
    remember("lead with sev0", slot="lead")
    before = OperatorMemory.objects.get()

    result = confirm_write("remember", category="preferences", slot="lead", value="LEAD  with sev0")

    after = OperatorMemory.objects.get()
    assert result["outcome"] == "reauthorized"
    assert (after.revision, after.value) == (1, "lead with sev0")
    assert after.reauthorized_ref != before.reauthorized_ref
    assert not OperatorMemoryHistory.objects.exists()


def test_remember_on_a_slot_holding_different_content_is_refused_with_slot_in_use(cast, remember, confirm_write):
    remember("lead with sev0", slot="lead")

    result = confirm_write("remember", category="preferences", slot="lead", value="lead with sev1")

    assert result["outcome"] == "refused"
    assert result["error"]["code"] == "slot_in_use"
    assert OperatorMemory.objects.get().value == "lead with sev0"


def test_the_standing_initiative_is_replaced_never_appended(cast, remember):
    first = remember("Phase 5 content round-trip", category="standing_initiative")
    second = remember("Phase 6 billing", category="standing_initiative")

    current = OperatorMemory.objects.get(category="standing_initiative")
    old = OperatorMemoryHistory.objects.get()
    assert second["outcome"] == "revised"
    assert current.slot == "current"
    assert current.memory_id == old.memory_id
    assert str(current.memory_id) == first["row"]["memory_id"]
    assert (old.value, old.revision, old.successor_revision) == ("Phase 5 content round-trip", 1, 2)
    assert (current.value, current.revision, current.predecessor_revision) == ("Phase 6 billing", 2, 1)


def test_the_standing_initiative_has_only_the_current_slot(cast, confirm_write):
    with pytest.raises(Exception) as refused:
        confirm_write("remember", category="standing_initiative", slot="other", value="Phase 5")

    assert getattr(refused.value, "code", None) == "validation_error"


def test_the_same_canonical_content_cannot_occupy_two_slots(cast, remember, confirm_write):
    remember("Lead with sev0", slot="lead")

    result = confirm_write("remember", category="preferences", slot="other", value=" lead\u00a0WITH  sev0 ")

    assert result["error"]["code"] == "duplicate_content"
    assert result["error"]["details"] == {"slot": "lead"}
    assert OperatorMemory.objects.count() == 1


def test_preferences_stop_at_twelve_slots(cast, remember, confirm_write):
    for i in range(12):
        remember(f"preference number {i}")

    result = confirm_write("remember", category="preferences", value="one too many")

    assert result["error"]["code"] == "category_full"
    assert OperatorMemory.objects.filter(category="preferences").count() == 12


def test_pinned_contexts_stop_at_eight(cast, remember, confirm_write, audit_ref):
    for i in range(8):
        remember(f"pin {i}", category="pinned_contexts", ref=audit_ref, slot=f"pin-{i}")

    result = confirm_write("remember", category="pinned_contexts", value="pin 9", ref=audit_ref, slot="pin-9")

    assert result["error"]["code"] == "category_full"


def test_policy_sets_salience_and_expiry_per_category(cast, remember, audit_ref):
    remember("Phase 5", category="standing_initiative")
    remember("the audit row", category="pinned_contexts", ref=audit_ref)
    rows = {row.category: row for row in rows_of(cast.owner)}

    assert rows["standing_initiative"].salience == 100
    assert rows["standing_initiative"].expires_at - rows["standing_initiative"].reauthorized_at == timedelta(days=30)
    assert rows["pinned_contexts"].salience == 80
    assert rows["pinned_contexts"].expires_at - rows["pinned_contexts"].reauthorized_at == timedelta(days=14)


def test_a_correction_archives_the_whole_prior_row_and_links_the_lineage(cast, remember, confirm_write):
    remember("lead with sev0", slot="lead")
    OperatorMemory.objects.update(last_used_at=timezone.now())
    before = OperatorMemory.objects.get()

    result = confirm_write("correct", category="preferences", slot="lead", value="lead with sev0 and sev1")

    after = OperatorMemory.objects.get()
    old = OperatorMemoryHistory.objects.get()
    assert result["outcome"] == "revised"
    assert after.memory_id == before.memory_id == old.memory_id
    assert (after.revision, after.predecessor_revision, old.revision, old.successor_revision) == (2, 1, 1, 2)
    for field in ("value", "canonical", "source_ref", "card_ref", "confirmed_at", "last_used_at", "salience"):
        assert getattr(old, field) == getattr(before, field), field
    assert after.source_ref == before.source_ref


def test_correcting_a_slot_that_holds_nothing_is_refused(cast, confirm_write):
    result = confirm_write("correct", category="preferences", slot="nothing", value="x y")

    assert result["error"]["code"] == "memory_not_found"


def test_reauthorization_renews_expiry_clears_last_use_and_keeps_content_and_revision(cast, remember, confirm_write):
    remember("Phase 5", category="standing_initiative")
    past = timezone.now() - timedelta(days=40)
    OperatorMemory.objects.update(reauthorized_at=past, expires_at=past + timedelta(days=30), last_used_at=past)
    before = OperatorMemory.objects.get()

    result = confirm_write("reauthorize", category="standing_initiative", slot="current")

    after = OperatorMemory.objects.get()
    assert result["outcome"] == "reauthorized"
    assert after.expires_at > timezone.now() + timedelta(days=29)
    assert after.last_used_at is None
    assert after.reauthorized_ref != before.reauthorized_ref
    assert (after.value, after.revision, after.card_ref, after.confirmed_at) == (
        before.value,
        before.revision,
        before.card_ref,
        before.confirmed_at,
    )
    assert not OperatorMemoryHistory.objects.exists()


def test_a_pin_the_operator_cannot_read_is_refused_at_write_time(cast):
    scope = scope_of(cast.owner, cast.acme)  # an operator without the auditor role cannot read audit rows

    with pytest.raises(Exception) as refused:
        memory_propose(scope, data={"op": "remember", "category": "pinned_contexts", "value": "x y", "ref": "audit:1"})

    assert refused.value.code == "reference_not_readable"


def test_a_pin_to_a_kind_no_app_resolves_yet_is_refused_with_a_typed_error(cast, monkeypatch):
    monkeypatch.delitem(refs._resolvers, "handoff", raising=False)
    monkeypatch.delitem(refs._many_resolvers, "handoff", raising=False)
    scope = scope_of(cast.owner, cast.acme)

    with pytest.raises(Exception) as refused:
        memory_propose(scope, data={"op": "remember", "category": "pinned_contexts", "value": "x", "ref": "handoff:h1"})

    assert refused.value.code == "reference_kind_unsupported"


def test_a_pin_needs_a_reference_and_other_notes_may_not_carry_one(cast, audit_ref):
    scope = scope_of(cast.owner, cast.acme)
    with pytest.raises(Exception) as no_ref:
        memory_propose(scope, data={"op": "remember", "category": "pinned_contexts", "value": "x"})
    with pytest.raises(Exception) as stray_ref:
        memory_propose(scope, data={"op": "remember", "category": "preferences", "value": "x", "ref": audit_ref})

    assert no_ref.value.code == stray_ref.value.code == "validation_error"


@pytest.mark.parametrize("value", ["", "   ", "x" * 281])
def test_values_must_be_non_empty_and_at_most_280_characters(cast, value):
    with pytest.raises(Exception) as refused:
        memory_propose(
            scope_of(cast.owner, cast.acme), data={"op": "remember", "category": "preferences", "value": value}
        )

    assert refused.value.code == "validation_error"


@pytest.mark.parametrize("slot", ["Upper", "has space", "x" * 65, "dot.ted"])
def test_slots_are_short_lowercase_identifiers(cast, slot):
    with pytest.raises(Exception) as refused:
        memory_propose(
            scope_of(cast.owner, cast.acme),
            data={"op": "remember", "category": "preferences", "slot": slot, "value": "v"},
        )

    assert refused.value.code == "validation_error"


def test_every_confirmed_write_is_audited_with_ids_and_never_the_text(cast, remember, confirm_write, audit_ref):
    remember("lead with sev0", slot="lead")
    confirm_write("correct", category="preferences", slot="lead", value="lead with sev1")
    confirm_write("reauthorize", category="preferences", slot="lead")
    remember("my secret label", category="pinned_contexts", ref=audit_ref, slot="pin")
    confirm_write("forget", category="preferences", slot="lead")
    confirm_write("forget_all")

    events = list(AuditEvent.objects.filter(action__startswith="memory.").order_by("seq"))
    assert [e.action for e in events] == [
        "memory.remember",
        "memory.correct",
        "memory.reauthorize",
        "memory.remember",
        "memory.forget",
        "memory.forget_all",
    ]
    assert events[1].metadata["revision"] == 2
    assert events[1].metadata["category"] == "preferences" and events[1].metadata["slot"] == "lead"
    assert events[4].metadata["deleted_count"] == 2
    assert events[5].metadata["deleted_count"] == 1
    assert all(e.metadata["memory_id"] for e in events[:4])
    dumped = repr([(e.metadata, e.target_id, e.outcome) for e in AuditEvent.objects.all()])
    for text in ("sev0", "sev1", "secret", "label", audit_ref):
        assert text not in dumped
