"""The Hermes provider beyond the contract suite, against the stand-in over real HTTP: idempotent runs and
the 409 conflict, an event stream cut mid-way, capabilities from the server, the tree of child sessions,
and a credential that never leaves the request header."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from providers_app.contract import (
    AttachMode,
    CapabilityUnsupported,
    ProviderConflict,
    ProviderError,
    ProviderUnavailable,
    RuntimeNotFound,
)
from providers_app.health import provider_health_report
from providers_app.hermes import HermesProvider, RunEvent
from providers_app.registry import reset_instances
from tess_site.scope import Scope

from .conftest import harness_factory
from .hermes_harness import HermesHarness
from .pi_harness import PiHarness


@pytest.fixture
def make_hermes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., HermesHarness]]:
    yield from harness_factory(HermesHarness, tmp_path_factory, "hermes-local")


@pytest.fixture
def hermes(make_hermes: Callable[..., HermesHarness]) -> HermesHarness:
    return make_hermes()


def texts(harness: HermesHarness, scope: Scope, ref: Any) -> list[str]:
    return [chunk.data for chunk in harness.provider.stream_session(ref, None, scope).chunks]


# --- sending ------------------------------------------------------------------------------------------


def test_a_retried_send_returns_the_same_run_and_starts_nothing_new(hermes: HermesHarness, system_scope: Scope) -> None:
    ref = hermes.start(system_scope, "alpha")

    first = hermes.provider.send_message(ref, "do it", "key-1", system_scope)
    again = hermes.provider.send_message(ref, "do it", "key-1", system_scope)

    assert (first.replayed, again.replayed) == (False, True)
    assert again.provider_message_id == first.provider_message_id
    assert hermes.received(ref) == "do it\n"
    assert len(hermes.standin.runs) == 1


def test_the_same_key_with_another_message_is_a_conflict(hermes: HermesHarness, system_scope: Scope) -> None:
    ref = hermes.start(system_scope, "alpha")
    hermes.provider.send_message(ref, "do it", "key-1", system_scope)

    with pytest.raises(ProviderConflict) as conflict:
        hermes.provider.send_message(ref, "do something else", "key-1", system_scope)

    assert conflict.value.details["code"] == "idempotency_key_conflict"
    assert hermes.received(ref) == "do it\n"


def test_the_same_caller_key_on_two_instances_are_two_runs(
    make_hermes: Callable[..., HermesHarness], system_scope: Scope
) -> None:
    one = make_hermes("one")
    two = HermesProvider(name="two", config={**one.config})
    ref_one = one.start(system_scope, "alpha")
    ref_two = two.start_session(system_scope, title="beta").ref

    first = one.provider.send_message(ref_one, "same", "key-1", system_scope)
    second = two.send_message(ref_two, "same", "key-1", system_scope)
    two.close()

    assert first.provider_message_id != second.provider_message_id
    assert not second.replayed


# --- run events ---------------------------------------------------------------------------------------


def start_a_run(harness: HermesHarness, scope: Scope) -> tuple[Any, str]:
    ref = harness.start(scope, "alpha")
    run_id = harness.provider.send_message(ref, "question", "key-1", scope).provider_message_id
    return ref, run_id


def test_run_events_arrive_live_until_the_run_completes(hermes: HermesHarness, system_scope: Scope) -> None:
    ref, run_id = start_a_run(hermes, system_scope)
    events: list[RunEvent] = []
    reader = threading.Thread(target=lambda: events.extend(hermes.provider.run_events(ref, run_id, system_scope)))
    reader.start()

    hermes.standin.finish_run(run_id, "the answer, in pieces ✓")
    reader.join(timeout=30)

    assert events[0].kind == "run.started"
    assert events[-1].kind == "run.completed"
    assert "".join(event.text for event in events) == "the answer, in pieces ✓"


def test_an_event_stream_cut_mid_way_raises_and_the_stored_messages_lose_nothing(
    hermes: HermesHarness, system_scope: Scope
) -> None:
    ref, run_id = start_a_run(hermes, system_scope)
    hermes.standin.finish_run(run_id, "complete answer", pieces=5)
    hermes.standin.cut_after[run_id] = 3
    seen: list[RunEvent] = []

    with pytest.raises(ProviderUnavailable):
        for event in hermes.provider.run_events(ref, run_id, system_scope):
            seen.append(event)

    assert [event.kind for event in seen] == ["run.started", "message.delta", "message.delta"]
    assert texts(hermes, system_scope, ref) == ["question\n", "complete answer\n"]
    del hermes.standin.cut_after[run_id]
    assert "".join(e.text for e in hermes.provider.run_events(ref, run_id, system_scope)) == "complete answer"


def test_run_events_of_another_sessions_run_are_not_found(hermes: HermesHarness, system_scope: Scope) -> None:
    _, run_id = start_a_run(hermes, system_scope)
    other = hermes.start(system_scope, "beta")

    with pytest.raises(RuntimeNotFound):
        list(hermes.provider.run_events(other, run_id, system_scope))


# --- terminate, capabilities, tree --------------------------------------------------------------------


def test_terminate_stops_the_running_run_and_ends_the_session(hermes: HermesHarness, system_scope: Scope) -> None:
    ref, run_id = start_a_run(hermes, system_scope)

    hermes.provider.terminate(ref, "approval-1", system_scope)

    assert hermes.standin.runs[run_id]["status"] == "cancelled"
    assert hermes.standin.sessions[ref.runtime_id]["end_reason"] == "terminated"
    assert hermes.provider.stream_session(ref, None, system_scope).ended


def test_what_the_server_does_not_offer_fails_closed(
    make_hermes: Callable[..., HermesHarness], system_scope: Scope
) -> None:
    harness = make_hermes(run_submission=False, run_stop=False)
    ref = harness.start(system_scope, "alpha")

    for call in (
        lambda: harness.provider.send_message(ref, "hi", "key-1", system_scope),
        lambda: harness.provider.terminate(ref, "approval-1", system_scope),
        lambda: harness.provider.attach(ref, AttachMode.INTERACTIVE, system_scope),
    ):
        with pytest.raises(CapabilityUnsupported):
            call()
    assert harness.received(ref) == ""
    assert harness.standin.sessions[ref.runtime_id]["ended_at"] is None


def test_the_tree_hangs_child_sessions_under_their_parent(hermes: HermesHarness, system_scope: Scope) -> None:
    ref = hermes.start(system_scope, "parent")
    live = hermes.standin.new_session("live child", parent=ref.runtime_id)
    ended = hermes.standin.new_session("ended child", parent=ref.runtime_id)
    hermes.standin.sessions[ended["id"]]["ended_at"] = 1.0

    [node] = hermes.provider.get_session_tree(system_scope, ref)

    assert [(child.id, child.active) for child in node.children] == [(live["id"], True), (ended["id"], False)]
    assert [s.ref.runtime_id for s in hermes.provider.list_sessions(system_scope)] == [ref.runtime_id]


# --- the credential and health -------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_key_never_appears_in_health_reports_or_logs(
    hermes: HermesHarness, settings: Any, caplog: pytest.LogCaptureFixture, system_scope: Scope
) -> None:
    caplog.set_level(logging.DEBUG)
    settings.TESS_RUNTIME_PROVIDERS = {"hermes-local": hermes.config}
    reset_instances()
    ref = hermes.start(system_scope, "alpha")
    hermes.provider.send_message(ref, "hi", "key-1", system_scope)
    try:
        report = provider_health_report()
    finally:
        reset_instances()

    assert report["instances"]["hermes-local"]["ok"] is True
    assert report["instances"]["hermes-local"]["detail"]["auth"] == "ok"
    assert hermes.standin.seen_authorization[-1] == f"Bearer {hermes.token}"
    for text in (json.dumps(report), caplog.text, repr(hermes.provider), repr(hermes.provider.health())):
        assert hermes.token not in text


def test_a_refused_key_makes_the_instance_unhealthy_and_operations_fail_typed(
    hermes: HermesHarness, system_scope: Scope
) -> None:
    hermes.key_file.write_text("wrong-key\n")

    health = hermes.provider.health()

    assert (health.ok, health.detail["auth"], health.detail["reachable"]) == (False, "refused", True)
    with pytest.raises(ProviderError) as refused:
        hermes.provider.list_sessions(system_scope)
    assert refused.value.code == "provider_credential_refused"
    assert "wrong-key" not in str(refused.value) + json.dumps(refused.value.details)


def test_the_key_can_come_from_a_named_environment_variable(
    hermes: HermesHarness, monkeypatch: pytest.MonkeyPatch, system_scope: Scope
) -> None:
    config = {key: value for key, value in hermes.config.items() if key != "api_key_file"}
    provider = HermesProvider(name="env", config={**config, "api_key_env": "TESS_TEST_HERMES_KEY"})

    missing = provider.health()
    monkeypatch.setenv("TESS_TEST_HERMES_KEY", hermes.token)
    present = provider.health()
    provider.close()

    assert (missing.ok, missing.detail["auth"]) == (False, "missing")
    assert (present.ok, present.detail["auth"]) == (True, "ok")


def test_a_key_written_into_the_configuration_is_refused_at_start(hermes: HermesHarness) -> None:
    with pytest.raises(ImproperlyConfigured):
        HermesProvider(name="bad", config={**hermes.config, "api_key": hermes.token})


def test_a_server_that_is_down_is_unhealthy_and_unavailable(tmp_path: Path, system_scope: Scope) -> None:
    key = tmp_path / "key"
    key.write_text("k")
    provider = HermesProvider(
        name="down", config={"kind": "hermes", "base_url": "http://127.0.0.1:9", "api_key_file": str(key)}
    )

    health = provider.health()

    assert (health.ok, health.detail["reachable"]) == (False, False)
    with pytest.raises(ProviderUnavailable):
        provider.list_sessions(system_scope)


@pytest.mark.django_db
def test_pi_and_hermes_instances_report_side_by_side(
    hermes: HermesHarness, tmp_path: Path, settings: Any, system_scope: Scope
) -> None:
    pi = PiHarness(tmp_path, "pi-one")
    pi.start(system_scope, "alpha")
    settings.TESS_RUNTIME_PROVIDERS = {"pi-one": pi.config, "hermes-local": hermes.config}
    reset_instances()
    try:
        report = provider_health_report()
    finally:
        reset_instances()

    assert report["ok"] is True
    assert {name: entry["kind"] for name, entry in report["instances"].items()} == {
        "pi-one": "pi",
        "hermes-local": "hermes",
    }
    assert report["instances"]["pi-one"]["detail"]["sessions"] == 1
