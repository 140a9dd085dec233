"""Operator memory under arbitrary sequences of writes (seed 002), as a hypothesis state machine.

Every write goes through the real card flow (propose a card, then confirm or dismiss it, possibly much
later); forgetting also goes through the direct privacy route. A plain model predicts each outcome; after
every step the database must match the model and hold the invariants: at most 12 preferences, 1 standing
initiative and 8 pinned contexts; no canonical content twice within a category; every superseded revision
belongs to a lineage that still exists, complete from revision 1.

Each example runs inside a savepoint of the test's transaction and is rolled back at its end, so examples
start from the same database without re-creating the cast.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from approvals_app.cards import CardAlreadyDecided, card_confirm, card_dismiss
from approvals_app.models import Card
from memory_app.models import OperatorMemory, OperatorMemoryHistory
from memory_app.policy import POLICY, STANDING_SLOT, Category, canonicalize, derived_slot
from memory_app.services import memory_forget, memory_propose
from tests.conftest import Cast, scope_of
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db

CI_SETTINGS = settings(
    max_examples=int(os.environ.get("TESS_HYPOTHESIS_EXAMPLES", "12")),
    stateful_step_count=40,
    deadline=None,
    database=None,  # no .hypothesis/ directory in the tree; failures print their reproducing steps
    derandomize=True,  # the same examples on every run: CI is reproducible
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Values chosen to collide: case and whitespace variants canonicalize to the same content.
VALUES = ["lead with sev0", "LEAD  with SEV0", "prefer tabs", " prefer\ttabs ", "ship on fridays", "be terse"]
SLOTS = [None, "a", "b"]
CATEGORIES = list(Category)


@dataclass(frozen=True)
class Note:
    canonical: str
    ref: str
    revision: int


@dataclass(frozen=True)
class Proposal:
    card_id: Any
    op: str
    category: Category | None
    slot: str | None
    value: str | None = None
    ref: str = ""


def _slot_for(category: Category, slot: str | None, value: str | None, ref: str) -> str:
    if category is Category.STANDING_INITIATIVE:
        return STANDING_SLOT
    return slot or derived_slot(category, ref or value or "")


def machine_for(cast: Cast, refs: list[str]) -> type[RuleBasedStateMachine]:
    class MemoryMachine(RuleBasedStateMachine):
        cards = Bundle("cards")

        def __init__(self) -> None:
            super().__init__()
            self.savepoint = transaction.savepoint()
            self.scope = scope_of(cast.owner, cast.acme)
            self.notes: dict[tuple[Category, str], Note] = {}
            self.pending: dict[Any, Proposal] = {}
            self.fill_counter = 0
            # The teammate's notes: nothing the owner does may touch them.
            memory_propose(
                scope_of(cast.teammate, cast.acme),
                data={"op": "remember", "category": "preferences", "value": "lead with sev0"},
            )
            card = Card.objects.filter(owner=cast.teammate, status="pending").get()
            card_confirm(scope=scope_of(cast.teammate, cast.acme), card_id=card.pk)

        def teardown(self) -> None:
            transaction.savepoint_rollback(self.savepoint)

        # --- the model ------------------------------------------------------------------------------------

        def expect(self, p: Proposal) -> tuple[str, int]:
            """The outcome (or refusal code) and deleted count the server must report for ``p`` now."""
            if p.op == "forget_all":
                return "deleted", sum(n.revision for n in self.notes.values())
            assert p.category is not None and p.slot is not None
            key = (p.category, p.slot)
            at = self.notes.get(key)
            if p.op == "forget":
                return "deleted", at.revision if at else 0
            if p.op == "reauthorize":
                return ("reauthorized", 0) if at else ("memory_not_found", 0)
            canonical = canonicalize(p.value or "")
            others = [n for (c, s), n in self.notes.items() if c is p.category and s != p.slot]
            duplicate = any(n.canonical == canonical for n in others)
            if at is not None:
                if at.canonical == canonical and at.ref == p.ref:
                    return "reauthorized", 0
                if p.op == "remember" and p.category is not Category.STANDING_INITIATIVE:
                    return "slot_in_use", 0
                return ("duplicate_content", 0) if duplicate else ("revised", 0)
            if p.op == "correct":
                return "memory_not_found", 0
            if duplicate:
                return "duplicate_content", 0
            if len(others) >= POLICY[p.category].ceiling:
                return "category_full", 0
            return "created", 0

        def apply_model(self, p: Proposal, outcome: str) -> None:
            if p.op == "forget_all":
                self.notes.clear()
                self.pending.clear()  # pending memory cards are dismissed with the notes
                return
            assert p.category is not None and p.slot is not None
            key = (p.category, p.slot)
            if p.op == "forget":
                self.notes.pop(key, None)
                for card_id, other in list(self.pending.items()):
                    if other.category is p.category and other.slot == p.slot:
                        del self.pending[card_id]
            elif outcome == "created":
                self.notes[key] = Note(canonicalize(p.value or ""), p.ref, 1)
            elif outcome == "revised":
                old = self.notes[key]
                self.notes[key] = replace(
                    old, canonical=canonicalize(p.value or ""), ref=p.ref, revision=old.revision + 1
                )

        # --- proposing and deciding cards ---------------------------------------------------------------

        def propose(
            self, op: str, category: Category | None, slot: str | None, value: str | None, ref: str
        ) -> Proposal:
            data: dict[str, Any] = {"op": op}
            if category is not None:
                data["category"] = category.value
                if category is Category.STANDING_INITIATIVE:
                    if op in ("forget", "reauthorize"):
                        data["slot"] = STANDING_SLOT  # these always name their slot
                elif slot is not None:
                    data["slot"] = slot  # otherwise the server derives it from the content
            if value is not None:
                data["value"] = value
            if ref:
                data["ref"] = ref
            card = memory_propose(self.scope, data=data)
            expected_slot = _slot_for(category, slot, value, ref) if category is not None else None
            assert card.payload.get("slot") == expected_slot
            proposal = Proposal(card.pk, op, category, expected_slot, value, ref)
            self.pending[card.pk] = proposal
            return proposal

        def confirm(self, proposal: Proposal) -> None:
            if proposal.card_id not in self.pending:
                with pytest.raises(CardAlreadyDecided):
                    card_confirm(scope=self.scope, card_id=proposal.card_id)
                return
            del self.pending[proposal.card_id]
            expected, deleted = self.expect(proposal)
            _, result = card_confirm(scope=self.scope, card_id=proposal.card_id)
            got = result["error"]["code"] if result["outcome"] == "refused" else result["outcome"]
            assert (got, result["deleted_count"]) == (expected, deleted), (proposal, result)
            self.apply_model(proposal, got)

        def write_args(self, category: Category, slot: str | None, value: str, ref_index: int) -> dict[str, Any]:
            ref = refs[ref_index] if POLICY[category].needs_ref else ""
            return {"category": category, "slot": slot, "value": value, "ref": ref}

        @rule(
            target=cards,
            op=st.sampled_from(["remember", "correct"]),
            category=st.sampled_from(CATEGORIES),
            slot=st.sampled_from(SLOTS[1:]),
            value=st.sampled_from(VALUES),
            ref_index=st.integers(0, len(refs) - 1),
        )
        def propose_write(self, op: str, category: Category, slot: str | None, value: str, ref_index: int) -> Proposal:
            return self.propose(op, **self.write_args(category, slot, value, ref_index))

        @rule(target=cards, category=st.sampled_from(CATEGORIES), slot=st.sampled_from(SLOTS[1:]))
        def propose_reauthorize(self, category: Category, slot: str) -> Proposal:
            return self.propose("reauthorize", category, slot, None, "")

        @rule(target=cards, category=st.sampled_from(CATEGORIES), slot=st.sampled_from(SLOTS[1:]))
        def propose_forget(self, category: Category, slot: str) -> Proposal:
            return self.propose("forget", category, slot, None, "")

        @rule(target=cards)
        def propose_forget_all(self) -> Proposal:
            return self.propose("forget_all", None, None, None, "")

        @rule(proposal=consumes(cards))
        def confirm_card(self, proposal: Proposal) -> None:
            self.confirm(proposal)

        @rule(proposal=consumes(cards))
        def dismiss_card(self, proposal: Proposal) -> None:
            if proposal.card_id not in self.pending:
                with pytest.raises(CardAlreadyDecided):
                    card_dismiss(scope=self.scope, card_id=proposal.card_id)
                return
            del self.pending[proposal.card_id]
            card_dismiss(scope=self.scope, card_id=proposal.card_id)

        @rule(
            category=st.sampled_from(CATEGORIES),
            slot=st.sampled_from(SLOTS),
            value=st.sampled_from(VALUES),
            ref_index=st.integers(0, len(refs) - 1),
        )
        def remember_now(self, category: Category, slot: str | None, value: str, ref_index: int) -> None:
            self.confirm(self.propose("remember", **self.write_args(category, slot, value, ref_index)))

        @precondition(lambda self: bool(self.notes))
        @rule(
            op=st.sampled_from(["correct", "reauthorize", "forget", "remember"]),
            value=st.sampled_from(VALUES),
            ref_index=st.integers(0, len(refs) - 1),
            data=st.data(),
        )
        def change_a_held_note(self, op: str, value: str, ref_index: int, data: st.DataObject) -> None:
            category, slot = data.draw(st.sampled_from(sorted(self.notes)), label="note")
            if op in ("correct", "remember"):
                self.confirm(self.propose(op, **self.write_args(category, slot, value, ref_index)))
            else:
                self.confirm(self.propose(op, category, slot, None, ""))

        @precondition(lambda self: self.fill_counter == 0)  # once per example: it takes many writes
        @rule(category=st.sampled_from(CATEGORIES), extra=st.integers(1, 2))
        def fill_to_the_ceiling(self, category: Category, extra: int) -> None:
            """Remember fresh notes until past the ceiling: the ceiling refuses, it never overflows."""
            held = sum(1 for c, _ in self.notes if c is category)
            for _ in range(max(0, POLICY[category].ceiling - held) + extra):
                self.fill_counter += 1
                args = self.write_args(category, f"fill-{self.fill_counter}", f"fill note {self.fill_counter}", 0)
                if category is not Category.PINNED_CONTEXTS:
                    args["ref"] = ""
                self.confirm(self.propose("remember", **args))

        @rule(category=st.sampled_from(CATEGORIES), slot=st.sampled_from(SLOTS[1:]))
        def forget_directly(self, category: Category, slot: str) -> None:
            proposal = Proposal(None, "forget", category, _slot_for(category, slot, None, ""))
            expected = self.expect(proposal)[1]
            outcome = memory_forget(self.scope, category=category.value, slot=proposal.slot, forget_all=False)
            assert outcome.deleted_count == expected
            self.apply_model(proposal, "deleted")

        @rule()
        def forget_everything_directly(self) -> None:
            expected = self.expect(Proposal(None, "forget_all", None, None))[1]
            assert memory_forget(self.scope, category=None, slot=None, forget_all=True).deleted_count == expected
            self.apply_model(Proposal(None, "forget_all", None, None), "deleted")

        # --- invariants ---------------------------------------------------------------------------------

        @invariant()
        def within_the_ceilings(self) -> None:
            counts = Counter(
                OperatorMemory.objects.filter(operator=cast.owner, tenant=cast.acme).values_list("category", flat=True)
            )
            for category, policy in POLICY.items():
                assert counts[category.value] <= policy.ceiling, counts

        @invariant()
        def no_content_twice_in_a_category(self) -> None:
            rows = OperatorMemory.objects.filter(operator=cast.owner).values_list("category", "canonical")
            assert len(set(rows)) == len(rows)

        @invariant()
        def history_belongs_to_living_complete_lineages(self) -> None:
            current = dict(OperatorMemory.objects.filter(operator=cast.owner).values_list("memory_id", "revision"))
            history: dict[Any, list[int]] = {}
            for memory_id, revision in OperatorMemoryHistory.objects.filter(operator=cast.owner).values_list(
                "memory_id", "revision"
            ):
                history.setdefault(memory_id, []).append(revision)
            assert set(history) <= set(current), "superseded revisions outlived their note"
            for memory_id, revision in current.items():
                assert sorted(history.get(memory_id, [])) == list(range(1, revision))

        @invariant()
        def the_database_matches_the_model(self) -> None:
            rows = OperatorMemory.objects.filter(operator=cast.owner, tenant=cast.acme).values_list(
                "category", "slot", "canonical", "ref", "revision"
            )
            assert {(Category(c), s): Note(k, r, v) for c, s, k, r, v in rows} == self.notes
            pending = set(
                Card.objects.filter(owner=cast.owner, kind="memory", status="pending").values_list("pk", flat=True)
            )
            assert pending == set(self.pending)

        @invariant()
        def the_teammates_note_is_untouched(self) -> None:
            assert OperatorMemory.objects.filter(operator=cast.teammate).count() == 1

    return MemoryMachine


def test_memory_writes_keep_the_ceilings_dedupe_and_lineage(cast):
    sessions = [SessionFactory.create(owner=cast.owner, tenant=cast.acme, title=f"pin {i}") for i in range(2)]
    machine = machine_for(cast, [f"session:{s.pk}" for s in sessions])
    run_state_machine_as_test(machine, settings=CI_SETTINGS)
