"""Named instances from settings, the tmux kind registered at start-up, and the health report."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from providers_app.contract import RuntimeNotFound
from providers_app.health import provider_health_report
from providers_app.registry import get_provider, registered_kinds, reset_instances
from providers_app.tmux import TmuxProvider
from tess_site.scope import Scope

from .conftest import TmuxHarness


@pytest.fixture
def configure(settings: Any) -> Iterator[Callable[[dict[str, Any]], None]]:
    def apply(instances: dict[str, Any]) -> None:
        settings.TESS_RUNTIME_PROVIDERS = instances
        reset_instances()

    yield apply
    reset_instances()


def test_the_tmux_kind_is_registered_at_start_up() -> None:
    assert "tmux" in registered_kinds()


def test_named_instances_are_built_once_each_from_settings(
    configure: Callable[[dict[str, Any]], None], make_tmux: Callable[..., TmuxHarness], system_scope: Scope
) -> None:
    one, two = make_tmux("one"), make_tmux("two")
    configure({"one": one.config, "two": two.config})
    ref = one.start(system_scope, "alpha")

    provider = get_provider("one")

    assert isinstance(provider, TmuxProvider)
    assert provider is get_provider("one")
    assert get_provider("two") is not provider
    assert [s.ref for s in provider.list_sessions(system_scope)] == [ref]
    assert get_provider("two").list_sessions(system_scope) == []
    with pytest.raises(RuntimeNotFound):
        get_provider("three")


@pytest.mark.django_db
def test_the_health_report_covers_every_instance(
    configure: Callable[[dict[str, Any]], None], make_tmux: Callable[..., TmuxHarness], system_scope: Scope
) -> None:
    good = make_tmux("good")
    good.start(system_scope, "alpha")
    configure({"good": good.config})

    report = provider_health_report()

    assert report["ok"] is True
    entry = report["instances"]["good"]
    assert (entry["ok"], entry["kind"], entry["detail"]["sessions"]) == (True, "tmux", 1)
    assert entry["heartbeat_at"]


@pytest.mark.django_db
def test_the_health_report_names_broken_instances_without_failing(
    configure: Callable[[dict[str, Any]], None], make_tmux: Callable[..., TmuxHarness]
) -> None:
    configure({"good": make_tmux("good").config, "no-socket": {"kind": "tmux"}, "unknown": {"kind": "telepathy"}})

    report = provider_health_report()

    assert report["ok"] is False
    assert report["instances"]["good"]["ok"] is True
    assert report["instances"]["no-socket"] == {
        "ok": False,
        "kind": "tmux",
        "detail": {"error": "ImproperlyConfigured"},
        "heartbeat_at": None,
        "heartbeat": {"last_at": None, "checked": False, "stale": False, "stale_after_seconds": 90},
    }
    assert report["instances"]["unknown"]["detail"] == {"error": "runtime_not_found"}


def test_with_no_instances_the_report_is_healthy_and_empty(configure: Callable[[dict[str, Any]], None]) -> None:
    configure({})

    assert provider_health_report() == {"ok": True, "instances": {}}


@pytest.mark.django_db
def test_the_authenticated_health_report_includes_every_runtime_instance(cast, api_as, settings, tmp_path):
    from providers_app.registry import reset_instances

    settings.TESS_RUNTIME_PROVIDERS = {"health-probe": {"kind": "tmux", "socket": str(tmp_path / "h.sock")}}
    reset_instances()
    try:
        body = api_as(cast.owner).get("/api/v1/health/").json()
    finally:
        reset_instances()
    report = body["checks"]["runtime_providers"]
    assert set(report["instances"]) == {"health-probe"}
    assert report["instances"]["health-probe"]["kind"] == "tmux"
