"""Forget, forget-all and erasure: rows deleted with their lineage, exact counts, no copy of the text left."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from approvals_app.models import Card
from memory_app.models import OperatorMemory, OperatorMemoryHistory
from memory_app.services import memory_propose
from tess_site.audit.models import AuditEvent
from tests.conftest import scope_of


@pytest.fixture
def lineage(cast, remember, confirm_write):
    """The owner: one preference corrected twice (3 rows in its lineage) and one other preference."""
    remember("lead with sev0", slot="lead")
    confirm_write("correct", category="preferences", slot="lead", value="lead with sev1")
    confirm_write("correct", category="preferences", slot="lead", value="lead with sev2")
    remember("skip the intro", slot="preamble")


def everything_tess_keeps() -> str:
    cards = list(Card.objects.values("payload", "outcome"))
    audit = list(AuditEvent.objects.values("metadata", "target_id", "outcome", "action"))
    memory = list(OperatorMemory.objects.values()) + list(OperatorMemoryHistory.objects.values())
    return json.dumps([cards, audit, memory], default=str)


def test_forgetting_one_slot_deletes_its_row_and_lineage_and_reports_the_count(cast, lineage, confirm_write):
    result = confirm_write("forget", category="preferences", slot="lead")

    assert result == {"outcome": "deleted", "deleted_count": 3, "redacted_count": 0, "row": None, "error": None}
    assert [r.slot for r in OperatorMemory.objects.all()] == ["preamble"]
    assert not OperatorMemoryHistory.objects.exists()


def test_forgetting_an_empty_slot_reports_zero(cast, confirm_write):
    result = confirm_write("forget", category="preferences", slot="nothing")

    assert (result["outcome"], result["deleted_count"]) == ("deleted", 0)


def test_forget_all_deletes_current_and_superseded_rows(cast, lineage, confirm_write):
    result = confirm_write("forget_all")

    assert result["deleted_count"] == 4
    assert not OperatorMemory.objects.exists() and not OperatorMemoryHistory.objects.exists()


@pytest.mark.parametrize(
    "data",
    [
        {"slot": "lead"},
        {"category": "preferences"},
        {"category": "preferences", "slot": ""},
        {"category": "standing_initiative"},
    ],
)
def test_ambiguous_forget_cards_are_refused(cast, data):
    with pytest.raises(Exception) as refused:
        memory_propose(scope_of(cast.owner, cast.acme), data={"op": "forget", **data})

    assert refused.value.code == "ambiguous_shape"


def test_forget_all_with_a_category_is_ambiguous(cast):
    with pytest.raises(Exception) as refused:
        memory_propose(scope_of(cast.owner, cast.acme), data={"op": "forget_all", "category": "preferences"})

    assert refused.value.code == "ambiguous_shape"


def test_forget_leaves_no_copy_of_the_text_in_memory_cards_or_audit(cast, lineage, confirm_write):
    pending = memory_propose(
        scope_of(cast.owner, cast.acme),
        data={"op": "correct", "category": "preferences", "slot": "lead", "value": "lead with sev3"},
    )

    confirm_write("forget", category="preferences", slot="lead")

    kept = everything_tess_keeps()
    for text in ("sev0", "sev1", "sev2", "sev3"):
        assert text not in kept
    assert "skip the intro" in kept  # the other note is untouched
    pending.refresh_from_db()
    assert pending.status == Card.Status.DISMISSED


def test_forget_all_leaves_no_copy_of_any_text(cast, lineage, confirm_write):
    confirm_write("forget_all")

    kept = everything_tess_keeps()
    for text in ("sev0", "sev1", "sev2", "intro"):
        assert text not in kept


def test_erasure_deletes_every_row_of_the_operator_in_every_tenant_and_prints_the_count(
    cast, lineage, remember, confirm_write, capsys
):
    from tess_site.accounts import services as accounts
    from tess_site.scope import Role

    accounts.membership_grant(tenant=cast.globex, user=cast.owner, role=Role.OPERATOR)
    confirm_write("remember", tenant=cast.globex, category="preferences", value="globex note")
    confirm_write("remember", user=cast.teammate, category="preferences", value="teammate note")

    call_command("tess_memory_erase", "--username", "owner")

    out = capsys.readouterr().out
    assert "acme\t4" in out and "globex\t1" in out and "deleted 5 rows" in out
    assert not OperatorMemory.objects.filter(operator=cast.owner).exists()
    assert not OperatorMemoryHistory.objects.filter(operator=cast.owner).exists()
    assert OperatorMemory.objects.filter(operator=cast.teammate).count() == 1
    kept = everything_tess_keeps()
    assert "sev2" not in kept and "globex note" not in kept
    erasures = AuditEvent.objects.filter(action="memory.erase")
    assert sorted(e.metadata["deleted_count"] for e in erasures) == [1, 4]


def test_erasure_of_an_operator_without_memory_reports_zero(cast, capsys):
    call_command("tess_memory_erase", "--username", "teammate")

    assert "deleted 0 rows" in capsys.readouterr().out
