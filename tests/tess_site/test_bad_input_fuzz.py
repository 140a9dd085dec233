"""Random JSON into every mutating route (hypothesis): whatever arrives — NUL, lone surrogates, control and
bidi characters, wrong types, odd nesting — the answer is below 500, and a refusal writes nothing."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from django.core.cache import cache
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .bad_input import (
    Request,
    World,
    as_json,
    changed,
    mutating_routes,
    table_counts,
    world_fixture,  # noqa: F401  (the ``world`` fixture)
)

pytestmark = pytest.mark.django_db

ROUTES = mutating_routes()
NASTY = st.sampled_from(["\x00", "\ud800", "\udfff", "\x1b", "\u202e", "\x7f", "\ufeff", "\u2028", "é", " "])
TEXT = st.text(alphabet=st.one_of(st.characters(codec="utf-8"), NASTY), max_size=24)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=10
)


@st.composite
def bodies(draw: Any, world: World, route: Any) -> Any:
    """Either the route's own fields with random values, or any JSON at all."""
    template = world.template(route)
    if isinstance(template, dict) and draw(st.booleans()):
        return {key: draw(VALUES) if draw(st.booleans()) else value for key, value in template.items()}
    return draw(VALUES)


def test_random_json_never_errors_and_never_writes_partially(world):
    @settings(
        max_examples=int(os.environ.get("TESS_HYPOTHESIS_EXAMPLES", "12")) * 8,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        route = data.draw(st.sampled_from(ROUTES), label="route")
        body = data.draw(bodies(world, route), label="body")
        savepoint = transaction.savepoint()
        try:
            cache.clear()
            before = table_counts()
            response = world.send(Request(route, world.path(route), as_json(body)))
            assert response.status_code < 500, (str(route), response.content[:300])
            if response.status_code >= 400:
                assert "error" in json.loads(response.content), (str(route), response.content[:300])
                assert changed(before, table_counts()) == {}, str(route)
        finally:
            transaction.savepoint_rollback(savepoint)

    one()
