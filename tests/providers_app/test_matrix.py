"""The Matrix provider against a real Synapse: back-filled gaps, idempotent sends, secrets, stop and leave.

The contract suite (``test_contract.py``) covers the rest through ``MatrixHarness``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from providers_app.contract import (
    AttachMode,
    CapabilityUnsupported,
    Operation,
    OutputChunk,
    RuntimeNotFound,
    RuntimeRef,
)
from providers_app.health import provider_health_report
from providers_app.matrix import MatrixProvider
from providers_app.registry import registered_kinds, reset_instances
from tess_site.scope import Scope

from .matrix_harness import MatrixHarness
from .synapse import Synapse


@pytest.fixture
def make_matrix(synapse: Synapse, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., MatrixHarness]]:
    made: list[MatrixHarness] = []

    def make(name: str = "agents", **extra: Any) -> MatrixHarness:
        harness = MatrixHarness(tmp_path_factory.mktemp(name), name, synapse, **extra)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.close()


def read_all(
    provider: MatrixProvider, ref: RuntimeRef, scope: Scope, cursor: str | None
) -> tuple[list[OutputChunk], str]:
    """Page from ``cursor`` until a page brings nothing; the chunks and the cursor after them."""
    chunks: list[OutputChunk] = []
    while True:
        page = provider.stream_session(ref, cursor, scope)
        chunks.extend(page.chunks)
        cursor = page.next_cursor
        if not page.chunks:
            return chunks, cursor


def counting_backfills(monkeypatch: pytest.MonkeyPatch, provider: MatrixProvider) -> list[str]:
    """Record each back-fill's starting token, so a test knows the gap really went through ``/messages``."""
    calls: list[str] = []
    original = provider._backfill

    def spy(room: str, start: str, stop: str) -> list[dict[str, Any]]:
        calls.append(start)
        return original(room, start, stop)

    monkeypatch.setattr(provider, "_backfill", spy)
    return calls


def test_the_matrix_kind_is_registered_at_start_up() -> None:
    assert "matrix" in registered_kinds()


# --- the stream --------------------------------------------------------------------------------------


def test_a_gap_longer_than_the_sync_timeline_is_back_filled_each_event_once(
    make_matrix: Callable[..., MatrixHarness], system_scope: Scope, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = make_matrix(timeline_limit=3)
    ref = runtime.start(system_scope, "alpha")
    runtime.emit(ref, b"before|")
    before, cursor = read_all(runtime.provider, ref, system_scope, None)
    backfills = counting_backfills(monkeypatch, runtime.provider)
    monkeypatch.setattr("providers_app.matrix.BACKFILL_PAGE", 4)  # the back-fill itself takes several pages
    sent = [f"event {number}|".encode() for number in range(17)]
    for body in sent:
        runtime.emit(ref, body)

    after, end = read_all(runtime.provider, ref, system_scope, cursor)

    assert "".join(chunk.data for chunk in before) == "before|\n"
    assert [chunk.data for chunk in after] == [body.decode() + "\n" for body in sent]
    assert len({chunk.source for chunk in after}) == len(sent)
    assert backfills, "the gap was longer than the timeline limit, so it must have been back-filled"
    assert runtime.provider.stream_session(ref, end, system_scope).chunks == ()


def test_a_cursor_read_by_another_process_gives_the_same_events(
    make_matrix: Callable[..., MatrixHarness], system_scope: Scope
) -> None:
    runtime = make_matrix(timeline_limit=2)
    ref = runtime.start(system_scope, "alpha")
    for number in range(7):
        runtime.emit(ref, f"line {number}\n".encode())
    first = runtime.provider.stream_session(ref, None, system_scope, limit=20)
    other = MatrixProvider(name=runtime.name, config=runtime.config)  # no cache: asks the homeserver afresh

    ours, _ = read_all(runtime.provider, ref, system_scope, first.next_cursor)
    theirs, _ = read_all(other, ref, system_scope, first.next_cursor)

    assert [(c.data, c.cursor, c.source) for c in ours] == [(c.data, c.cursor, c.source) for c in theirs]
    assert "".join(c.data for c in (*first.chunks, *ours)) == "".join(f"line {n}\n" for n in range(7))
    other.client.close()


def test_a_character_longer_than_the_page_limit_still_advances_whole(
    make_matrix: Callable[..., MatrixHarness], system_scope: Scope
) -> None:
    runtime = make_matrix()
    ref = runtime.start(system_scope, "alpha")
    runtime.emit(ref, "aé🎉".encode())

    pages = [runtime.provider.stream_session(ref, None, system_scope, limit=1)]
    while pages[-1].chunks:
        pages.append(runtime.provider.stream_session(ref, pages[-1].next_cursor, system_scope, limit=1))

    assert [chunk.data for page in pages for chunk in page.chunks] == ["a", "é", "🎉", "\n"]


def test_the_stream_leaves_out_what_the_bot_itself_posted(
    make_matrix: Callable[..., MatrixHarness], system_scope: Scope
) -> None:
    runtime = make_matrix()
    ref = runtime.start(system_scope, "alpha")
    runtime.emit(ref, b"from the agent|")
    runtime.provider.send_message(ref, "from the operator", "key-1", system_scope)
    runtime.emit(ref, b"agent again")

    chunks, _ = read_all(runtime.provider, ref, system_scope, None)

    assert "".join(chunk.data for chunk in chunks) == "from the agent|\nagent again\n"


# --- sending -----------------------------------------------------------------------------------------


def test_a_retried_send_returns_the_same_event_and_posts_once(
    make_matrix: Callable[..., MatrixHarness], system_scope: Scope
) -> None:
    runtime = make_matrix()
    ref = runtime.start(system_scope, "alpha")

    first = runtime.provider.send_message(ref, "deploy", "key-1", system_scope)
    retry = runtime.provider.send_message(ref, "deploy", "key-1", system_scope)
    elsewhere = MatrixProvider(name=runtime.name, config=runtime.config)  # another process, same bot
    again = elsewhere.send_message(ref, "deploy", "key-1", system_scope)
    other = runtime.provider.send_message(ref, "deploy", "key-2", system_scope)

    assert first.delivered and not first.replayed
    assert retry.provider_message_id == first.provider_message_id
    assert retry.replayed
    assert again.provider_message_id == first.provider_message_id
    assert other.provider_message_id != first.provider_message_id
    assert runtime.received(ref) == "deploy\ndeploy\n"
    elsewhere.client.close()


def test_the_transaction_id_depends_on_the_room_and_the_key_only() -> None:
    one = MatrixProvider.txn_id("!a", "send", "key-1")

    assert one == MatrixProvider.txn_id("!a", "send", "key-1")
    assert len({one, MatrixProvider.txn_id("!b", "send", "key-1"), MatrixProvider.txn_id("!a", "send", "key-2")}) == 3


def test_a_room_the_bot_was_never_in_is_not_found(
    make_matrix: Callable[..., MatrixHarness], system_scope: Scope
) -> None:
    runtime = make_matrix()
    own = runtime.start(system_scope, "alpha")
    room = runtime.agent.call("POST", "/createRoom", json={"name": "private"})["room_id"]
    foreign = RuntimeRef(instance=own.instance, runtime_id=room, identity=own.identity)

    for call in (
        lambda: runtime.provider.stream_session(foreign, None, system_scope),
        lambda: runtime.provider.send_message(foreign, "hi", "key-1", system_scope),
        lambda: runtime.provider.attach(foreign, AttachMode.READ_ONLY, system_scope),
        lambda: runtime.provider.get_session_tree(system_scope, foreign),
        lambda: runtime.provider.terminate(foreign, "approval-1", system_scope),
    ):
        with pytest.raises(RuntimeNotFound):
            call()
    assert [event["sender"] for event in runtime.agent.messages(room)] == []


# --- tree, start, terminate --------------------------------------------------------------------------


def test_threads_appear_under_the_room_beside_the_main_timeline(
    make_matrix: Callable[..., MatrixHarness], system_scope: Scope
) -> None:
    runtime = make_matrix()
    ref = runtime.start(system_scope, "alpha")
    root = runtime.agent.say(ref.runtime_id, "a question")
    runtime.agent.say(ref.runtime_id, "an answer", **{"m.relates_to": {"rel_type": "m.thread", "event_id": root}})

    (room,) = runtime.provider.get_session_tree(system_scope, ref)

    assert [(child.kind, child.id, child.active) for child in room.children] == [
        ("timeline", "main", True),
        ("thread", root, False),
    ]
    assert room.children[1].title == "a question"


def test_starting_a_room_is_unsupported_without_configured_invitees(
    make_matrix: Callable[..., MatrixHarness], system_scope: Scope
) -> None:
    runtime = make_matrix(invite=[])

    with pytest.raises(CapabilityUnsupported):
        runtime.provider.start_session(system_scope, title="alpha")

    assert Operation.START not in runtime.provider.capabilities().operations
    assert runtime.provider.list_sessions(system_scope) == []


def test_terminate_posts_the_stop_message_then_leaves(
    make_matrix: Callable[..., MatrixHarness], system_scope: Scope
) -> None:
    runtime = make_matrix(stop_message="Stopping now.")
    ref = runtime.start(system_scope, "alpha")

    runtime.provider.terminate(ref, "approval-7", system_scope)

    assert runtime.received(ref) == "Stopping now.\n"
    assert runtime.agent.membership(ref.runtime_id, runtime.bot.user_id) == "leave"
    assert runtime.provider.list_sessions(system_scope) == []


# --- configuration and secrets -----------------------------------------------------------------------


def test_a_token_written_into_settings_is_refused(synapse: Synapse) -> None:
    with pytest.raises(ImproperlyConfigured) as refused:
        MatrixProvider(name="x", config={"homeserver": synapse.url, "access_token": "syt_secret"})

    assert "syt_secret" not in str(refused.value)


def test_the_token_can_come_from_an_environment_variable(
    synapse: Synapse, monkeypatch: pytest.MonkeyPatch, system_scope: Scope
) -> None:
    bot = synapse.register("bot-env")
    monkeypatch.setenv("TESS_TEST_MATRIX_TOKEN", bot.access_token)

    provider = MatrixProvider(
        name="env", config={"homeserver": synapse.url, "access_token_env": "TESS_TEST_MATRIX_TOKEN"}
    )

    assert provider.health().detail["user_id"] == bot.user_id
    provider.client.close()


@pytest.mark.parametrize(
    "source", [{"access_token_env": "TESS_TEST_NO_SUCH_VARIABLE"}, {"access_token_file": "/nonexistent"}]
)
def test_a_missing_token_is_a_configuration_error(synapse: Synapse, source: dict[str, str]) -> None:
    with pytest.raises(ImproperlyConfigured):
        MatrixProvider(name="x", config={"homeserver": synapse.url, **source})


@pytest.mark.django_db
def test_the_token_never_reaches_logs_health_or_errors(
    make_matrix: Callable[..., MatrixHarness],
    system_scope: Scope,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    runtime = make_matrix()
    token = runtime.bot.access_token
    ref = runtime.start(system_scope, "alpha")
    runtime.emit(ref, b"hello")
    runtime.provider.send_message(ref, "hi", "key-1", system_scope)
    read_all(runtime.provider, ref, system_scope, None)
    settings.TESS_RUNTIME_PROVIDERS = {"agents": runtime.config}
    reset_instances()
    try:
        report = provider_health_report()
    finally:
        reset_instances()
    with pytest.raises(RuntimeNotFound) as refused:
        runtime.provider.send_message(RuntimeRef("agents", "!nowhere"), "hi", "key-2", system_scope)

    assert report["instances"]["agents"]["ok"] is True
    assert report["instances"]["agents"]["detail"]["user_id"] == runtime.bot.user_id
    for text in (str(report), caplog.text, repr(runtime.provider.client), str(refused.value.details)):
        assert token not in text
    assert token not in str(runtime.provider.__dict__)


def test_a_refused_token_makes_the_instance_unhealthy_without_showing_it(
    synapse: Synapse, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token_file = tmp_path / "token"
    token_file.write_text("syt_not_a_real_token")
    provider = MatrixProvider(name="stale", config={"homeserver": synapse.url, "access_token_file": str(token_file)})

    health = provider.health()

    assert not health.ok
    assert health.detail["error"] == "provider_unauthorized"
    assert health.heartbeat_at is None
    assert "syt_not_a_real_token" not in str(health) + caplog.text
    provider.client.close()


def test_an_unreachable_homeserver_is_unhealthy(tmp_path: Any) -> None:
    from .synapse import free_port

    token_file = tmp_path / "token"
    token_file.write_text("syt_token")
    provider = MatrixProvider(
        name="gone", config={"homeserver": f"http://127.0.0.1:{free_port()}", "access_token_file": str(token_file)}
    )

    health = provider.health()

    assert (health.ok, health.detail["error"]) == (False, "provider_unavailable")
    provider.client.close()
