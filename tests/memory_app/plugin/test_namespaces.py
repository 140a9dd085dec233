"""Namespace isolation: tenants, owners, sessions, and differently named instances of one kind."""

from __future__ import annotations

import pytest

from memory_app.plugin.contract import CaptureNeedsSession, OperationalMemoryNotFound
from memory_app.plugin.registry import UnknownAdapterKind
from tests.conftest import scope_of

pytestmark = pytest.mark.django_db(transaction=False)


def test_capture_writes_into_the_sessions_namespace(cast, make_plugin, session_scope):
    result = make_plugin().capture(session_scope(session="sess-9"), source="session.ended", text="deploy finished")
    assert result.record.namespace.as_dict() == {
        "tenant": str(cast.acme.pk),
        "owner": str(cast.owner.pk),
        "session": "sess-9",
    }


def test_results_carry_provenance(cast, make_plugin, session_scope):
    plugin = make_plugin(name="primary")
    plugin.capture(session_scope(correlation_id="corr-77"), source="approval.executed", text="restart approved")
    [record] = plugin.recent(scope_of(cast.owner, cast.acme))
    provenance = record.provenance()
    assert provenance["source"] == "approval.executed"
    assert provenance["channel"] == "web"
    assert provenance["correlation_id"] == "corr-77"
    assert provenance["adapter_kind"] == "orm"
    assert provenance["adapter_instance"] == "primary"
    assert provenance["captured_at"]


def test_reads_span_the_owners_sessions(cast, make_plugin, session_scope):
    plugin = make_plugin()
    plugin.capture(session_scope(session="a"), source="session.ended", text="payments rollout paused")
    plugin.capture(session_scope(session="b"), source="session.ended", text="payments rollout resumed")
    owner = scope_of(cast.owner, cast.acme)
    assert {r.namespace.session for r in plugin.recent(owner)} == {"a", "b"}
    assert {r.namespace.session for r in plugin.search(owner, query="payments rollout")} == {"a", "b"}


def test_it_never_returns_another_owners_records(cast, make_plugin, session_scope):
    plugin = make_plugin()
    plugin.capture(session_scope(), source="session.ended", text="secret project codename")
    teammate = scope_of(cast.teammate, cast.acme)
    assert plugin.recent(teammate) == []
    assert plugin.search(teammate, query="project codename") == []
    assert plugin.stats(teammate)["count"] == 0


def test_it_never_returns_another_tenants_records(cast, make_plugin, session_scope):
    from tess_site.accounts import services as accounts
    from tess_site.scope import Role

    accounts.membership_grant(tenant=cast.globex, user=cast.owner, role=Role.OPERATOR)
    plugin = make_plugin()
    plugin.capture(session_scope(), source="session.ended", text="acme only handoff")
    assert plugin.recent(scope_of(cast.owner, cast.globex)) == []
    assert plugin.recent(scope_of(cast.outsider, cast.globex)) == []
    assert len(plugin.recent(scope_of(cast.owner, cast.acme))) == 1


def test_a_differently_named_instance_is_isolated(cast, make_plugin, session_scope):
    alpha, beta = make_plugin(name="alpha"), make_plugin(name="beta")
    alpha.capture(session_scope(), source="session.ended", text="alpha knows this")
    owner = scope_of(cast.owner, cast.acme)
    assert [r.text for r in alpha.recent(owner)] == ["alpha knows this"]
    assert beta.recent(owner) == []
    assert beta.search(owner, query="alpha knows") == []
    record = alpha.recent(owner)[0]
    with pytest.raises(OperationalMemoryNotFound):
        beta.delete(owner, record_id=record.id)


def test_capture_without_a_session_is_refused(cast, make_plugin):
    with pytest.raises(CaptureNeedsSession):
        make_plugin().capture(scope_of(cast.owner, cast.acme), source="session.ended", text="x")


def test_an_unregistered_kind_is_refused(make_plugin):
    with pytest.raises(UnknownAdapterKind):
        make_plugin(kind="nonexistent")


def test_the_owner_deletes_their_record(cast, make_plugin, session_scope):
    plugin = make_plugin()
    record = plugin.capture(session_scope(), source="session.ended", text="to be forgotten").record
    plugin.delete(scope_of(cast.owner, cast.acme), record_id=record.id)
    assert plugin.recent(scope_of(cast.owner, cast.acme)) == []


def test_it_refuses_to_delete_another_owners_record(cast, make_plugin, session_scope):
    plugin = make_plugin()
    record = plugin.capture(session_scope(), source="session.ended", text="mine").record
    with pytest.raises(OperationalMemoryNotFound):
        plugin.delete(scope_of(cast.teammate, cast.acme), record_id=record.id)
    assert len(plugin.recent(scope_of(cast.owner, cast.acme))) == 1
