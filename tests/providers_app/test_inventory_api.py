"""GET /api/v1/providers/: the instances a tenant may use, what they support, and whether they answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from providers_app.registry import reset_instances

pytestmark = pytest.mark.django_db


@pytest.fixture
def instances(settings, tmp_path) -> Iterator[None]:
    settings.TESS_RUNTIME_PROVIDERS = {
        "shared": {"kind": "tmux", "socket": str(tmp_path / "s.sock")},
        "globex-only": {"kind": "tmux", "socket": str(tmp_path / "g.sock"), "tenants": ["globex"]},
        "broken": {"kind": "nonexistent"},
    }
    reset_instances()
    yield
    reset_instances()


def test_members_see_the_instances_of_their_tenant_with_capabilities_and_health(cast, api_as, instances):
    body = api_as(cast.owner).get("/api/v1/providers/").json()
    by_name = {entry["name"]: entry for entry in body["results"]}
    assert set(by_name) == {"shared", "broken"}  # globex-only does not exist for acme
    assert by_name["shared"]["kind"] == "tmux" and "send_message" in by_name["shared"]["operations"]
    assert by_name["shared"]["health"]["ok"] is True
    assert by_name["broken"]["health"] == {
        "ok": False,
        "heartbeat_at": None,
        "error": "runtime_not_found",
        "stale": False,
    }


def test_another_tenant_sees_its_own_instances(cast, api_as, instances):
    names = [entry["name"] for entry in api_as(cast.outsider, cast.globex).get("/api/v1/providers/").json()["results"]]
    assert names == ["broken", "globex-only", "shared"]


def test_anonymous_callers_are_refused(db, instances):
    from rest_framework.test import APIClient

    assert APIClient().get("/api/v1/providers/").status_code == 401
