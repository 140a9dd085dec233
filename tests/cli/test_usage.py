"""``tess usage`` against a live server: the caller's usage summed per group; no cost shown as such, never 0."""

from __future__ import annotations

import json

import pytest

from sessions_app.usage import usage_record
from tests.cli.conftest import Tess
from tests.factories import SessionFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_usage_prints_the_caller_s_costs_per_model_and_the_unpriced_steps_apart(cast, tess: Tess) -> None:
    mine = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    theirs = SessionFactory.create(owner=cast.teammate, tenant=cast.acme)
    step = {"input": 100, "output": 20, "currency": "USD"}
    usage_record(session=mine, steps=[{**step, "ref": "a", "model": "sol", "cost": "0.75"}])
    usage_record(session=mine, steps=[{**step, "ref": "b", "model": "local"}])
    usage_record(session=theirs, steps=[{**step, "ref": "c", "model": "sol", "cost": "5"}])
    tess.login("owner")

    shown = tess("usage", "--group-by", "model")
    assert shown.returncode == 0, shown.stderr
    lines = [line.split() for line in shown.stdout.splitlines()]
    assert lines[0][:3] == ["GROUP", "COST", "CURRENCY"]
    assert ["local", "-", "-", "1", "1", "100", "20"] in lines  # unpriced: no figure
    assert ["sol", "0.75", "USD", "0", "1", "100", "20"] in lines  # the teammate's 5 USD is not the caller's

    as_json = json.loads(tess("usage", "--group-by", "session", "--json").stdout)
    assert {row["group"] for row in as_json} == {str(mine.pk)}
    refused = tess("usage", "--since", "last week")
    assert refused.returncode == 2 and "--since: expected a day as YYYY-MM-DD" in refused.stderr
