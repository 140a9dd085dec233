"""The ``plastmem`` adapter against a local stand-in of plast-mem's v0 routes, over real HTTP."""

from __future__ import annotations

import uuid

import httpx
import pytest

from memory_app.plastmem_client import PLASTMEM_NAMESPACE, PlastMemClient, PlastMemError, conversation_id
from memory_app.plugin.contract import AdapterUnavailable, DeleteUnsupported
from tests.conftest import scope_of
from tests.memory_app.plastmem_standin import unreachable_url

pytestmark = pytest.mark.django_db


def test_a_capture_is_written_with_add_message_and_millisecond_timestamp(cast, make_plugin, session_scope, plastmem):
    plugin = make_plugin(name="pm", kind="plastmem", url=plastmem.url)
    result = plugin.capture(session_scope(session="s1"), source="session.ended", text="run 42 ended green")
    [body] = plastmem.requests_to("add_message")
    expected = uuid.uuid5(PLASTMEM_NAMESPACE, f"operational-memory/pm/{cast.acme.pk}/{cast.owner.pk}")
    assert body["conversation_id"] == str(expected)
    assert body["message"]["role"] == "system"
    assert isinstance(body["message"]["timestamp"], int)
    assert body["message"]["timestamp"] == int(result.record.captured_at.timestamp() * 1000)
    assert "session: s1" in body["message"]["content"]


def test_recent_and_search_read_back_with_provenance(cast, make_plugin, session_scope, plastmem):
    plugin = make_plugin(name="pm", kind="plastmem", url=plastmem.url)
    plugin.capture(session_scope(session="s1", correlation_id="c-1"), source="session.ended", text="ledger job done")
    plugin.capture(session_scope(session="s2"), source="checkpoint", text="compacted after ledger import")
    owner = scope_of(cast.owner, cast.acme)
    recent = plugin.recent(owner)
    assert [r.text for r in recent] == ["compacted after ledger import", "ledger job done"]
    assert recent[1].provenance()["correlation_id"] == "c-1"
    assert recent[1].provenance()["adapter_kind"] == "plastmem"
    assert recent[1].namespace.session == "s1"
    found = plugin.search(owner, query="ledger job")
    assert found[0].text == "ledger job done"
    assert found[0].score is not None


def test_owners_and_named_instances_are_isolated(cast, make_plugin, session_scope, plastmem):
    one = make_plugin(name="one", kind="plastmem", url=plastmem.url)
    two = make_plugin(name="two", kind="plastmem", url=plastmem.url)
    one.capture(session_scope(), source="checkpoint", text="only in one")
    assert [r.text for r in one.recent(scope_of(cast.owner, cast.acme))] == ["only in one"]
    assert two.recent(scope_of(cast.owner, cast.acme)) == []
    assert one.recent(scope_of(cast.teammate, cast.acme)) == []
    assert one.recent(scope_of(cast.outsider, cast.globex)) == []


def test_deletion_is_refused_with_a_typed_error(cast, make_plugin, session_scope, plastmem):
    plugin = make_plugin(name="pm", kind="plastmem", url=plastmem.url)
    record = plugin.capture(session_scope(), source="checkpoint", text="cannot be deleted").record
    assert plugin.stats(scope_of(cast.owner, cast.acme))["capabilities"]["delete"] is False
    with pytest.raises(DeleteUnsupported):
        plugin.delete(scope_of(cast.owner, cast.acme), record_id=record.id)
    assert len(plugin.recent(scope_of(cast.owner, cast.acme))) == 1


def test_an_unreachable_server_is_a_typed_unavailable_error(make_plugin, session_scope, cast):
    plugin = make_plugin(name="pm", kind="plastmem", url=unreachable_url())
    with pytest.raises(AdapterUnavailable):
        plugin.capture(session_scope(), source="checkpoint", text="nobody listens")
    with pytest.raises(AdapterUnavailable):
        plugin.recent(scope_of(cast.owner, cast.acme))


def test_an_empty_query_never_reaches_plast_mem(cast, make_plugin, plastmem):
    from tess_site.errors import InvalidInput

    plugin = make_plugin(name="pm", kind="plastmem", url=plastmem.url)
    with pytest.raises(InvalidInput):
        plugin.search(scope_of(cast.owner, cast.acme), query="")
    assert plastmem.requests_to("retrieve_memory/raw") == []


# --- the stand-in's documented quirks, as the client meets them -------------------------------------------


def test_empty_content_is_a_plain_text_500(plastmem):
    client = PlastMemClient(base_url=plastmem.url)
    with pytest.raises(PlastMemError) as caught:
        client.add_message(conversation_id("x"), role="user", content="", timestamp_ms=1)
    assert caught.value.status == 500
    assert caught.value.body == "Message content cannot be empty"
    assert caught.value.permanent


def test_empty_query_is_a_plain_text_500(plastmem):
    response = httpx.post(
        f"{plastmem.url}/api/v0/context_pre_retrieve", json={"conversation_id": str(uuid.uuid4()), "query": ""}
    )
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "Query cannot be empty"


def test_timestamps_are_milliseconds_in_and_rfc3339_out(plastmem):
    conv = str(uuid.uuid4())
    refused = httpx.post(
        f"{plastmem.url}/api/v0/add_message",
        json={"conversation_id": conv, "message": {"role": "user", "content": "hi", "timestamp": "2026-01-01"}},
    )
    assert refused.status_code == 422
    ok = httpx.post(
        f"{plastmem.url}/api/v0/add_message",
        json={"conversation_id": conv, "message": {"role": "user", "content": "hi", "timestamp": 1767225600000}},
    )
    assert ok.json() == {"accepted": True}
    [episode] = httpx.post(f"{plastmem.url}/api/v0/recent_memory/raw", json={"conversation_id": conv}).json()
    assert episode["messages"][0]["timestamp"] == "2026-01-01T00:00:00Z"


def test_there_is_no_delete_route(plastmem):
    assert httpx.delete(f"{plastmem.url}/api/v0/memory/1").status_code == 404
