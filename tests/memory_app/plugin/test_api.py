"""Operational memory over the API: the owner lists and deletes their records; nobody else sees them."""

from __future__ import annotations

import pytest

from memory_app.plugin import operator_memory_plugin
from memory_app.plugin.models import OperationalMemoryRecord

URL = "/api/v1/memory/operational/"


@pytest.fixture
def captured(cast, session_scope):
    plugin = operator_memory_plugin()
    return [
        plugin.capture(session_scope(session=f"s{n}"), source="session.ended", text=f"rollout step {n} done").record
        for n in range(3)
    ]


def test_the_owner_lists_their_recent_records(cast, api_as, captured):
    response = api_as(cast.owner).get(URL)
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["text"] for r in results] == ["rollout step 2 done", "rollout step 1 done", "rollout step 0 done"]
    assert results[0]["provenance"]["adapter_kind"] == "orm"
    assert results[0]["namespace"] == {"tenant": str(cast.acme.pk), "owner": str(cast.owner.pk), "session": "s2"}


def test_the_owner_searches_their_records(cast, api_as, captured):
    response = api_as(cast.owner).get(URL, {"q": "step 1"})
    assert response.status_code == 200
    assert response.json()["results"][0]["text"] == "rollout step 1 done"


def test_listing_takes_a_bounded_number_of_queries(cast, api_as, captured, django_assert_max_num_queries):
    client = api_as(cast.owner)
    with django_assert_max_num_queries(6):
        assert client.get(URL).status_code == 200


@pytest.mark.parametrize("who", ["teammate", "outsider"])
def test_it_refuses_other_owners_lists(cast, api_as, captured, who):
    response = api_as(getattr(cast, who), cast.globex if who == "outsider" else None).get(URL)
    assert response.status_code == 200
    assert response.json()["results"] == []


def test_the_owner_deletes_a_record(cast, api_as, captured):
    response = api_as(cast.owner).delete(f"{URL}{captured[0].id}/")
    assert response.status_code == 204
    assert not OperationalMemoryRecord.objects.filter(pk=captured[0].id).exists()


@pytest.mark.parametrize("who", ["teammate", "outsider"])
def test_it_refuses_to_delete_other_owners_records(cast, api_as, captured, who):
    response = api_as(getattr(cast, who), cast.globex if who == "outsider" else None).delete(f"{URL}{captured[0].id}/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "operational_memory_not_found"
    assert OperationalMemoryRecord.objects.filter(pk=captured[0].id).exists()


def test_a_nonexistent_record_is_404(cast, api_as):
    assert api_as(cast.owner).delete(f"{URL}not-a-uuid/").status_code == 404


def test_stats_describe_the_adapter_and_count_only_your_records(cast, api_as, captured):
    body = api_as(cast.owner).get(f"{URL}stats/").json()
    assert body["count"] == 3
    assert body["adapter_kind"] == "orm" and body["adapter_instance"] == "default"
    assert body["capabilities"]["delete"] is True
    assert api_as(cast.teammate).get(f"{URL}stats/").json()["count"] == 0


def test_delete_is_refused_with_a_typed_error_on_plastmem(cast, api_as, settings, plastmem, session_scope):
    from memory_app.plugin.registry import reset_plugins

    settings.TESS_MEMORY_PLUGIN = {"active": "pm", "instances": {"pm": {"kind": "plastmem", "url": plastmem.url}}}
    reset_plugins()
    record = operator_memory_plugin().capture(session_scope(), source="checkpoint", text="kept forever").record
    response = api_as(cast.owner).delete(f"{URL}{record.id}/")
    assert response.status_code == 501
    assert response.json()["error"]["code"] == "operational_memory_delete_unsupported"


def test_it_refuses_anonymous_callers(client):
    assert client.get(URL).status_code in (401, 403)
