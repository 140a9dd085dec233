"""The AgentRuntimeProvider contract: every provider kind in ``conftest.HARNESSES`` must pass all of it.

Each test runs against a real peer (tmux: a real server on a private socket). Waits are polls with a
deadline (``wait_for``); nothing here asserts on time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from providers_app.contract import (
    AgentRuntimeProvider,
    ApprovalRequired,
    AttachMode,
    Capabilities,
    CapabilityUnsupported,
    CursorLost,
    Operation,
    OutputChunk,
    ProviderHealth,
    ProviderUnavailable,
    RuntimeNotFound,
    RuntimeRef,
    StreamPage,
)
from providers_app.heartbeat import heartbeat_record, heartbeat_require_fresh
from tess_site.scope import Scope
from tests.waiting import wait_for

from .conftest import Harness

PAYLOAD = ("héllo wörld ✓ 🎉 ünïcode\tline\r\n" * 60 + "the end").encode()


def read_until(
    provider: AgentRuntimeProvider, ref: RuntimeRef, scope: Scope, cursor: str | None, size: int, limit: int
) -> tuple[list[OutputChunk], str]:
    """Page through the stream from ``cursor`` until ``size`` bytes arrived; the chunks and the last cursor."""
    chunks: list[OutputChunk] = []
    state: dict[str, Any] = {"cursor": cursor, "bytes": 0}

    def step() -> bool:
        while state["bytes"] < size:  # page on at once while pages bring something; wait only when dry
            page = provider.stream_session(ref, state["cursor"], scope, limit=limit)
            chunks.extend(page.chunks)
            state["bytes"] += sum(len(chunk.data.encode()) for chunk in page.chunks)
            state["cursor"] = page.next_cursor
            if not page.chunks:
                return False
        return True

    wait_for(step, f"{size} bytes of output")
    return chunks, state["cursor"]


def shown(runtime: Harness, data: bytes) -> str:
    """What the stream shows of ``data`` written in one go: the bytes themselves, or for a runtime of messages
    that ends each message's line, that message (the harness's ``shown``)."""
    render: Callable[[bytes], str] | None = getattr(runtime, "shown", None)
    return render(data) if render is not None else data.decode()


def read_to_the_end(provider: AgentRuntimeProvider, ref: RuntimeRef, scope: Scope) -> StreamPage:
    """The whole stream in one page, once the provider says it has ended."""

    def ended() -> StreamPage | None:
        page = provider.stream_session(ref, None, scope)
        return page if page.ended else None

    return wait_for(ended, "the stream to end")


def listed_ids(provider: AgentRuntimeProvider, scope: Scope) -> list[str]:
    return [session.ref.runtime_id for session in provider.list_sessions(scope)]


def unsupported(runtime: Harness) -> frozenset[Operation]:
    """What the harness's kind legitimately does not offer (none unless it says so); each must fail closed."""
    return frozenset(getattr(runtime, "unsupported", frozenset()))


def live_calls(runtime: Harness, ref: RuntimeRef, scope: Scope) -> dict[Operation, Callable[[], object]]:
    provider = runtime.provider
    return {
        Operation.LIST: lambda: provider.list_sessions(scope),
        Operation.TREE: lambda: provider.get_session_tree(scope, ref),
        Operation.STREAM: lambda: provider.stream_session(ref, None, scope),
        Operation.SEND: lambda: provider.send_message(ref, "hi", "key-u", scope),
        Operation.ATTACH: lambda: provider.attach(ref, AttachMode.READ_ONLY, scope),
        Operation.DETACH: lambda: provider.detach(ref, scope),
        Operation.TERMINATE: lambda: provider.terminate(ref, "approval-1", scope),
        Operation.START: lambda: provider.start_session(scope, title="t"),
    }


# --- capabilities and health -------------------------------------------------------------------------


def test_it_describes_itself_and_reports_a_heartbeat(runtime: Harness, system_scope: Scope) -> None:
    runtime.start(system_scope, "alpha")
    capabilities = runtime.provider.capabilities()
    health = runtime.provider.health()

    assert capabilities.kind == runtime.provider.kind
    assert capabilities.instance == runtime.name
    assert AttachMode.READ_ONLY in capabilities.attach_modes
    assert health.ok
    assert (health.kind, health.instance) == (runtime.provider.kind, runtime.name)
    assert health.heartbeat_at is not None


def test_each_heartbeat_is_a_look_taken_when_asked(runtime: Harness, system_scope: Scope) -> None:
    """Tess counts an instance down once its heartbeats stop passing (``providers_app.heartbeat``); a provider
    that reported a remembered time would keep a dead peer looking alive."""
    runtime.start(system_scope, "alpha")
    before = datetime.now(UTC)
    first = runtime.provider.health()
    between = datetime.now(UTC)
    second = runtime.provider.health()
    after = datetime.now(UTC)

    assert first.ok and second.ok
    assert first.heartbeat_at is not None and second.heartbeat_at is not None
    assert before <= first.heartbeat_at <= between <= second.heartbeat_at <= after


@pytest.mark.django_db
def test_its_heartbeat_keeps_the_instance_fresh_and_without_one_sends_fail_fast(
    runtime: Harness, system_scope: Scope, settings: Any
) -> None:
    ref = runtime.start(system_scope, "alpha")
    health = runtime.provider.health()
    heartbeat_record(instance=runtime.name, kind=health.kind, ok=health.ok)
    heartbeat_require_fresh(runtime.name)

    quiet = datetime.now(UTC) - timedelta(seconds=settings.TESS_HEARTBEAT_STALE_SECONDS + 1)
    heartbeat_record(instance=runtime.name, kind=health.kind, ok=True, at=quiet)
    with pytest.raises(ProviderUnavailable) as refused:
        heartbeat_require_fresh(runtime.name)
    assert refused.value.details["instance"] == runtime.name
    assert runtime.received(ref) == ""


def test_it_declares_exactly_the_operations_it_offers(runtime: Harness) -> None:
    assert runtime.provider.capabilities().operations == frozenset(Operation) - unsupported(runtime)


def test_every_operation_it_does_not_offer_raises_the_typed_error(runtime: Harness, system_scope: Scope) -> None:
    ref = runtime.start(system_scope, "alpha")
    calls = live_calls(runtime, ref, system_scope)

    for operation in sorted(unsupported(runtime)):
        with pytest.raises(CapabilityUnsupported) as refused:
            calls[operation]()
        assert refused.value.details["operation"] == operation.value
    assert listed_ids(runtime.provider, system_scope) == [ref.runtime_id]
    assert runtime.received(ref) == ""


# --- list and tree -----------------------------------------------------------------------------------


def test_it_lists_a_started_session_under_its_exact_reference(runtime: Harness, system_scope: Scope) -> None:
    ref = runtime.start(system_scope, "alpha")

    sessions = runtime.provider.list_sessions(system_scope)

    assert [session.ref for session in sessions] == [ref]
    assert sessions[0].title == "alpha"
    assert sessions[0].status == getattr(runtime, "started_status", "running")
    assert ref.instance == runtime.name


def test_the_tree_shows_the_session_with_its_windows_and_panes(runtime: Harness, system_scope: Scope) -> None:
    ref = runtime.start(system_scope, "alpha")
    runtime.start(system_scope, "beta")

    tree = runtime.provider.get_session_tree(system_scope, ref)
    everything = runtime.provider.get_session_tree(system_scope)

    assert [node.id for node in tree] == [ref.runtime_id]
    assert len(everything) == 2
    session = tree[0]
    assert session.title == "alpha"
    assert bool(session.children) == getattr(runtime, "starts_with_children", True)
    active = [child for child in session.children if child.active]
    assert len(active) == (1 if session.children else 0), "exactly one active child"
    assert all(len([leaf for leaf in child.children if leaf.active]) <= 1 for child in session.children)


# --- the stream --------------------------------------------------------------------------------------


def test_small_pages_reassemble_the_output_exactly(runtime: Harness, system_scope: Scope) -> None:
    ref = runtime.start(system_scope, "alpha")
    runtime.emit(ref, PAYLOAD)

    chunks, _ = read_until(runtime.provider, ref, system_scope, None, len(PAYLOAD), limit=7)

    assert "".join(chunk.data for chunk in chunks) == PAYLOAD.decode()
    assert all(len(chunk.data.encode()) <= 7 for chunk in chunks)
    assert all(earlier.next_cursor == later.cursor for earlier, later in itertools.pairwise(chunks))


def test_resuming_from_a_middle_cursor_continues_exactly(runtime: Harness, system_scope: Scope) -> None:
    ref = runtime.start(system_scope, "alpha")
    runtime.emit(ref, PAYLOAD)
    whole = shown(runtime, PAYLOAD)
    chunks, end = read_until(runtime.provider, ref, system_scope, None, len(whole.encode()), limit=100)
    middle = len(chunks) // 2
    already = "".join(chunk.data for chunk in chunks[: middle + 1])

    rest, _ = read_until(
        runtime.provider, ref, system_scope, chunks[middle].next_cursor, len(whole.encode()) - len(already.encode()), 13
    )

    assert already + "".join(chunk.data for chunk in rest) == whole
    assert runtime.provider.stream_session(ref, end, system_scope).chunks == ()


def test_output_written_later_follows_the_cursor_without_gaps_or_repeats(runtime: Harness, system_scope: Scope) -> None:
    ref = runtime.start(system_scope, "alpha")
    runtime.emit(ref, b"first part|")
    expected_first = shown(runtime, b"first part|")
    first, cursor = read_until(runtime.provider, ref, system_scope, None, len(expected_first.encode()), limit=5)
    runtime.emit(ref, "second pärt".encode())
    expected_second = shown(runtime, "second pärt".encode())

    second, _ = read_until(runtime.provider, ref, system_scope, cursor, len(expected_second.encode()), limit=5)

    assert "".join(chunk.data for chunk in first) == expected_first
    assert "".join(chunk.data for chunk in second) == expected_second


def test_a_compaction_is_marked_once_as_a_checkpoint_that_resumes_exactly(
    runtime: Harness, system_scope: Scope
) -> None:
    """Checkpoints: a runtime that compacts its context declares it (``Capabilities.checkpoints``) and marks
    each compaction in its stream once, with the fields Tess records and a cursor that resumes at it; one
    that does not declares that, and its stream never carries one."""
    ref = runtime.start(system_scope, "alpha")
    compacts = getattr(runtime, "compact", None)
    assert runtime.provider.capabilities().checkpoints is (compacts is not None)
    runtime.emit(ref, b"before ")
    if compacts is not None:
        compacts(ref, "what came before")
    runtime.emit(ref, b"after")
    before, after = shown(runtime, b"before "), shown(runtime, b"after")

    chunks, _ = read_until(runtime.provider, ref, system_scope, None, len((before + after).encode()), 65536)
    marked = [chunk for chunk in chunks if chunk.checkpoint is not None]
    assert "".join(chunk.data for chunk in chunks).endswith(before + after)
    if compacts is None:
        assert marked == []
        return
    (checkpoint,) = marked
    assert checkpoint.data == ""
    assert checkpoint.checkpoint is not None
    assert set(checkpoint.checkpoint) == {"kind", "entry_id", "summary", "first_kept_entry_id", "tokens_before"}
    assert checkpoint.checkpoint["summary"] == "what came before"
    resumed = runtime.provider.stream_session(ref, checkpoint.cursor, system_scope).chunks
    assert resumed[0].checkpoint == checkpoint.checkpoint and "".join(c.data for c in resumed) == after
    past = runtime.provider.stream_session(ref, checkpoint.next_cursor, system_scope).chunks
    assert all(c.checkpoint is None for c in past) and "".join(c.data for c in past) == after


def test_a_stream_rewritten_under_its_cursor_resumes_from_the_checkpoint_exactly(
    runtime: Harness, system_scope: Scope
) -> None:
    """Compaction recovery: when a runtime that keeps checkpoints rewrites its stream (pi migrating a session
    file moves every byte offset), the old cursor is refused as lost rather than read on from the wrong
    place, and ``resume_cursor`` finds the same point again from the checkpoint Tess recorded: nothing
    repeated, nothing skipped, even in the middle of an entry. A runtime without checkpoints fails closed."""
    provider = runtime.provider
    ref = runtime.start(system_scope, "alpha")
    compacts = getattr(runtime, "compact", None)
    if compacts is None:
        with pytest.raises(CapabilityUnsupported):
            provider.resume_cursor(ref, "", {"entry_id": "x", "cursor": ""}, system_scope)
        return
    runtime.emit(ref, b"before ")
    compacts(ref, "what came before")
    runtime.emit(ref, b"kept words ")
    before, kept, after = (shown(runtime, data) for data in (b"before ", b"kept words ", b"after"))
    chunks, cursor = read_until(provider, ref, system_scope, None, len((before + "ke").encode()), limit=3)
    (marked,) = [chunk for chunk in chunks if chunk.checkpoint is not None]
    recorded = {**(marked.checkpoint or {}), "cursor": marked.cursor}
    read = "".join(chunk.data for chunk in chunks)
    assert read.startswith(before + "k") and len(read) < len(before + kept)  # stopped inside an entry

    runtime.rewrite(ref)  # type: ignore[attr-defined]
    runtime.emit(ref, b"after")

    with pytest.raises(CursorLost):
        provider.stream_session(ref, cursor, system_scope)
    resumed = provider.resume_cursor(ref, cursor, recorded, system_scope)
    expected = (before + kept + after)[len(read) :]
    rest, _ = read_until(provider, ref, system_scope, resumed, len(expected.encode()), limit=65536)
    assert "".join(chunk.data for chunk in rest) == expected
    assert all(chunk.checkpoint is None for chunk in rest)


def test_a_malformed_cursor_is_refused(runtime: Harness, system_scope: Scope) -> None:
    from tess_site.errors import InvalidInput

    ref = runtime.start(system_scope, "alpha")

    with pytest.raises(InvalidInput):
        runtime.provider.stream_session(ref, "not a cursor", system_scope)


# --- send, attach, terminate -------------------------------------------------------------------------


def test_a_sent_message_arrives_in_the_runtime_once(runtime: Harness, system_scope: Scope) -> None:
    ref = runtime.start(system_scope, "alpha")
    if Operation.SEND in unsupported(runtime):
        with pytest.raises(CapabilityUnsupported):
            runtime.provider.send_message(ref, "hello wörld", "key-1", system_scope)
        assert runtime.received(ref) == ""
        return

    result = runtime.provider.send_message(ref, "hello wörld", "key-1", system_scope)

    assert result.delivered
    assert wait_for(lambda: runtime.received(ref), "the message to arrive") == "hello wörld\n"


def test_a_send_retried_with_the_same_key_is_never_delivered_twice_when_reported_as_replayed(
    runtime: Harness, system_scope: Scope
) -> None:
    """A provider that recognises retries (``recognises_retries``) must say so and deliver once; one that
    cannot (tmux, pi) reports ``replayed=False`` and leaves once-only delivery to the caller's inbox."""
    ref = runtime.start(system_scope, "alpha")
    if Operation.SEND in unsupported(runtime):
        with pytest.raises(CapabilityUnsupported):
            runtime.provider.send_message(ref, "once", "key-r", system_scope)
        return

    first = runtime.provider.send_message(ref, "once", "key-r", system_scope)
    again = runtime.provider.send_message(ref, "once", "key-r", system_scope)

    recognises = getattr(runtime, "recognises_retries", None)
    assert not first.replayed
    if recognises is not None:
        assert again.replayed == recognises
    if again.replayed:
        assert again.provider_message_id == first.provider_message_id
        assert wait_for(lambda: runtime.received(ref), "the message to arrive") == "once\n"


def test_attach_gives_every_declared_mode_and_detach_ends_it(runtime: Harness, system_scope: Scope) -> None:
    ref = runtime.start(system_scope, "alpha")
    modes = runtime.provider.capabilities().attach_modes

    for mode in modes:
        attachment = runtime.provider.attach(ref, mode, system_scope)
        assert (attachment.ref, attachment.mode) == (ref, mode)
        runtime.provider.detach(ref, system_scope)
    for mode in set(AttachMode) - modes:
        with pytest.raises(CapabilityUnsupported):
            runtime.provider.attach(ref, mode, system_scope)


@pytest.mark.parametrize("approval_ref", ["", "   "])
def test_terminate_is_refused_without_an_approval_reference(
    runtime: Harness, system_scope: Scope, approval_ref: str
) -> None:
    ref = runtime.start(system_scope, "alpha")
    refusal = CapabilityUnsupported if Operation.TERMINATE in unsupported(runtime) else ApprovalRequired

    with pytest.raises(refusal):
        runtime.provider.terminate(ref, approval_ref, system_scope)

    assert listed_ids(runtime.provider, system_scope) == [ref.runtime_id]


def test_terminate_with_an_approval_reference_ends_only_that_session(runtime: Harness, system_scope: Scope) -> None:
    doomed = runtime.start(system_scope, "alpha")
    kept = runtime.start(system_scope, "beta")
    runtime.emit(doomed, b"last words")
    last_words = shown(runtime, b"last words")
    read_until(runtime.provider, doomed, system_scope, None, len(last_words.encode()), limit=64)
    if Operation.TERMINATE in unsupported(runtime):
        with pytest.raises(CapabilityUnsupported):
            runtime.provider.terminate(doomed, "approval-1", system_scope)
        assert sorted(listed_ids(runtime.provider, system_scope)) == sorted([doomed.runtime_id, kept.runtime_id])
        assert not runtime.provider.stream_session(doomed, None, system_scope).ended
        return

    runtime.provider.terminate(doomed, "approval-1", system_scope)

    assert listed_ids(runtime.provider, system_scope) == [kept.runtime_id]
    with pytest.raises(RuntimeNotFound):
        runtime.provider.send_message(doomed, "anyone?", "key-2", system_scope)
    with pytest.raises(RuntimeNotFound):
        runtime.provider.terminate(doomed, "approval-1", system_scope)
    assert "".join(chunk.data for chunk in read_to_the_end(runtime.provider, doomed, system_scope).chunks) == last_words
    assert not runtime.provider.stream_session(kept, None, system_scope).ended


# --- failing closed ----------------------------------------------------------------------------------


class CapabilitiesOnly(AgentRuntimeProvider):
    """A provider that implements nothing beyond the two required operations."""

    kind = "bare"

    def capabilities(self) -> Capabilities:
        return Capabilities(kind=self.kind, instance=self.name, operations=frozenset())

    def health(self) -> ProviderHealth:
        return ProviderHealth(ok=True, kind=self.kind, instance=self.name)


REF = RuntimeRef(instance="bare", runtime_id="x")
CALLS: dict[Operation, Callable[[AgentRuntimeProvider, Scope], object]] = {
    Operation.LIST: lambda provider, scope: provider.list_sessions(scope),
    Operation.TREE: lambda provider, scope: provider.get_session_tree(scope),
    Operation.STREAM: lambda provider, scope: provider.stream_session(REF, None, scope),
    Operation.SEND: lambda provider, scope: provider.send_message(REF, "hi", "key", scope),
    Operation.ATTACH: lambda provider, scope: provider.attach(REF, AttachMode.READ_ONLY, scope),
    Operation.DETACH: lambda provider, scope: provider.detach(REF, scope),
    Operation.TERMINATE: lambda provider, scope: provider.terminate(REF, "approval-1", scope),
    Operation.START: lambda provider, scope: provider.start_session(scope, title="t"),
}


def test_every_operation_has_a_fail_closed_check_here() -> None:
    assert set(CALLS) == set(Operation)


@pytest.mark.parametrize("operation", list(Operation))
def test_an_operation_a_provider_does_not_implement_fails_closed(operation: Operation, system_scope: Scope) -> None:
    provider = CapabilitiesOnly(name="bare", config={})

    with pytest.raises(CapabilityUnsupported) as refused:
        CALLS[operation](provider, system_scope)
    with pytest.raises(CapabilityUnsupported):
        provider.require(operation)

    assert refused.value.details == {"provider": "bare", "kind": "bare", "operation": operation.value}
    assert provider.health().ok


# --- named instances ---------------------------------------------------------------------------------


def test_two_named_instances_never_see_each_others_sessions(
    make_runtime: Callable[..., Harness], system_scope: Scope
) -> None:
    alpha, beta = make_runtime("alpha"), make_runtime("beta")
    alpha_ref = alpha.start(system_scope, "same-title")
    beta_ref = beta.start(system_scope, "same-title")

    assert listed_ids(alpha.provider, system_scope) == [alpha_ref.runtime_id]
    assert [s.ref for s in beta.provider.list_sessions(system_scope)] == [beta_ref]
    assert alpha_ref != beta_ref
    calls = live_calls(beta, alpha_ref, system_scope)
    for operation in (Operation.STREAM, Operation.SEND, Operation.ATTACH, Operation.TREE, Operation.TERMINATE):
        # An operation the kind does not offer fails closed before it looks at the reference.
        refusal = CapabilityUnsupported if operation in unsupported(beta) else RuntimeNotFound
        with pytest.raises(refusal):
            calls[operation]()
    assert listed_ids(alpha.provider, system_scope) == [alpha_ref.runtime_id]
    assert alpha.received(alpha_ref) == ""
