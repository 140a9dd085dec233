"""Names people read in the admin: every model's plural is English ("operator memory notes", "external
identities"), not Django's default of adding an "s" ("memorys", "identitys", "switchs")."""

from __future__ import annotations

import re

import pytest
from django.apps import apps

OURS = ("accounts", "audit", "approvals_app", "memory_app", "sessions_app", "discord")
# Endings that adding an "s" gets wrong: a consonant then "ys", and "chs", "shs", "ss"+"s", "xs", "zs".
WRONG = re.compile(r"([^aeiou]ys|chs|shs|sss|xs|zs)$")


@pytest.mark.parametrize(
    "model", [m for m in apps.get_models() if m._meta.app_label in OURS], ids=lambda m: m._meta.label
)
def test_every_model_has_an_english_plural(model):
    plural = str(model._meta.verbose_name_plural)
    assert not WRONG.search(plural), f"{model._meta.label}: {plural!r}"


def test_the_admin_lists_operator_memory_notes():
    from memory_app.models import MemorySwitch, OperatorMemory, OperatorMemoryHistory

    assert OperatorMemory._meta.verbose_name_plural == "operator memory notes"
    assert OperatorMemoryHistory._meta.verbose_name_plural == "superseded operator memory notes"
    assert MemorySwitch._meta.verbose_name_plural == "operator memory switches"
