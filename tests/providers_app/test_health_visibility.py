"""What ``/api/v1/health/`` shows of the runtime providers depends on who asks.

A tenant member sees the instances their tenant may use, with states and counts but no socket paths,
addresses or process ids; another tenant's instance is not listed at all. A superuser sees everything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from providers_app.registry import reset_instances
from tess_site.accounts import services as accounts
from tess_site.scope import Role, Scope

from .conftest import TmuxHarness

pytestmark = pytest.mark.django_db


@pytest.fixture
def instances(settings: Any, make_tmux: Callable[..., TmuxHarness], system_scope: Scope) -> Iterator[None]:
    shared, theirs = make_tmux("shared"), make_tmux("theirs")
    shared.start(system_scope, "alpha")
    settings.TESS_RUNTIME_PROVIDERS = {"shared": shared.config, "theirs": {**theirs.config, "tenants": ["globex"]}}
    reset_instances()
    yield
    reset_instances()


def providers_seen(client: Any) -> dict[str, Any]:
    response = client.get("/api/v1/health/")
    assert response.status_code in (200, 503), response.json()
    return dict(response.json()["checks"]["runtime_providers"]["instances"])


def test_a_member_sees_only_their_tenants_instances_without_paths_or_pids(cast, api_as, instances):
    seen = providers_seen(api_as(cast.owner))

    assert set(seen) == {"shared"}
    detail = seen["shared"]["detail"]
    assert detail["sessions"] == 1 and detail["server_alive"] is True
    assert not any("socket" in key or "pid" in key or "path" in key for key in detail)
    assert "/" not in str(seen)


def test_the_other_tenant_sees_its_own_instance(cast, api_as, instances):
    assert set(providers_seen(api_as(cast.outsider, cast.globex))) == {"shared", "theirs"}


def test_a_superuser_sees_every_instance_in_full(cast, api_as, instances):
    root = User.objects.create_superuser("root", password="root-pass-1234")
    accounts.membership_grant(tenant=cast.acme, user=root, role=Role.OPERATOR)

    seen = providers_seen(api_as(root))

    assert set(seen) == {"shared", "theirs"}
    assert "socket" in seen["shared"]["detail"]
