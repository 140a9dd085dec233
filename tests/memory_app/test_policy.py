"""Server-owned shapes: canonical form, refused end-customer data, derived slots."""

from __future__ import annotations

import pytest
from django.test import override_settings

from memory_app.errors import MemberDataRefused
from memory_app.policy import Category, canonicalize, check_value, derived_slot
from memory_app.services import memory_propose
from tests.conftest import scope_of


def test_canonical_form_collapses_unicode_whitespace_trims_and_case_folds():
    assert canonicalize("  Lead\u2003WITH\n\tSev0\u00a0 ") == "lead with sev0"
    assert canonicalize("STRASSE") == canonicalize("straße")


@pytest.mark.parametrize(
    "value",
    ["ping ana@example.com first", "watch mem_8f3k2a", "MBR-00912 escalations", "member-4471 is VIP", "member_x9y8"],
)
def test_end_customer_data_is_refused_with_member_data_refused(cast, value):
    with pytest.raises(MemberDataRefused) as refused:
        memory_propose(
            scope_of(cast.owner, cast.acme), data={"op": "remember", "category": "preferences", "value": value}
        )

    assert refused.value.code == "member_data_refused"
    assert value not in refused.value.message


@pytest.mark.parametrize("value", ["lead with member-facing incidents", "memory of sev0 first", "use the mem_ prefix"])
def test_ordinary_words_near_the_member_shapes_are_kept(value):
    assert check_value(value) == value


@override_settings(TESS_MEMORY_REFUSED_PATTERNS=[r"\bACCT-\d+"])
def test_more_refused_shapes_are_configurable():
    with pytest.raises(MemberDataRefused):
        check_value("watch ACCT-1234")


def test_a_derived_slot_is_stable_for_the_same_content_and_holds_none_of_its_words():
    slot = derived_slot(Category.PREFERENCES, "Lead with SEV0")

    assert slot == derived_slot(Category.PREFERENCES, " lead  with sev0")
    assert "lead" not in slot and "sev0" not in slot
    assert derived_slot(Category.STANDING_INITIATIVE, "anything") == "current"
