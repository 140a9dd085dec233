"""Search: PostgreSQL full-text ranking, and the LIKE fallback used on SQLite."""

from __future__ import annotations

import pytest

from memory_app.plugin.contract import Namespace
from memory_app.plugin.orm import OrmAdapter
from tests.conftest import scope_of


@pytest.mark.postgres
def test_search_ranks_by_relevance_on_postgres(cast, make_plugin, session_scope):
    plugin = make_plugin()
    best = "the billing worker restarted after the billing migration"
    plugin.capture(session_scope(), source="checkpoint", text=best)
    plugin.capture(session_scope(), source="checkpoint", text="billing dashboard checked")
    plugin.capture(session_scope(), source="checkpoint", text="frontend build green")
    results = plugin.search(scope_of(cast.owner, cast.acme), query="billing migration")
    # websearch syntax: both words must match; the unrelated and the half-matching records stay out.
    assert [r.text for r in results] == ["the billing worker restarted after the billing migration"]
    results = plugin.search(scope_of(cast.owner, cast.acme), query="billing")
    assert [r.text for r in results] == [
        "the billing worker restarted after the billing migration",
        "billing dashboard checked",
    ]
    assert results[0].score is not None and results[1].score is not None
    assert results[0].score > results[1].score


@pytest.mark.postgres
def test_search_uses_stemming_on_postgres(cast, make_plugin, session_scope):
    plugin = make_plugin()
    plugin.capture(session_scope(), source="session.ended", text="deployments were rolled back")
    assert len(plugin.search(scope_of(cast.owner, cast.acme), query="deployment rollback rolled")) == 0
    assert len(plugin.search(scope_of(cast.owner, cast.acme), query="deployment rolled")) == 1


def test_the_like_fallback_ranks_by_matched_terms(cast, make_plugin, session_scope):
    plugin = make_plugin(name="fallback")
    plugin.capture(session_scope(), source="checkpoint", text="Billing dashboard checked")
    plugin.capture(session_scope(), source="checkpoint", text="billing migration done")
    plugin.capture(session_scope(), source="checkpoint", text="frontend build green")
    adapter = OrmAdapter(name="fallback", config={})
    namespace = Namespace(tenant=str(cast.acme.pk), owner=str(cast.owner.pk))
    results = adapter._search_like(namespace, "billing migration", 10)
    assert [r.text for r in results] == ["billing migration done", "Billing dashboard checked"]
    teammate = Namespace(tenant=str(cast.acme.pk), owner=str(cast.teammate.pk))
    assert adapter._search_like(teammate, "billing", 10) == []


def test_an_empty_query_is_refused_before_any_adapter(cast, make_plugin):
    from tess_site.errors import InvalidInput

    with pytest.raises(InvalidInput):
        make_plugin().search(scope_of(cast.owner, cast.acme), query="   ")
