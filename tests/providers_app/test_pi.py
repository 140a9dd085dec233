"""The pi provider beyond the contract suite: real v3 files with branches and compaction, a growing file
followed live, references that cannot escape their directory, RPC framing, and the real pi executable."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from providers_app import pi_files
from providers_app.contract import (
    AttachMode,
    CapabilityUnsupported,
    CursorLost,
    OutputChunk,
    ProviderError,
    RuntimeNode,
    RuntimeNotFound,
    RuntimeRef,
)
from providers_app.pi import PiProvider
from providers_app.pi_rpc import RpcProcess
from tess_site.errors import InvalidInput
from tess_site.scope import Scope
from tests.conftest import require_or_skip
from tests.waiting import wait_for

from .pi_harness import PiHarness, PiRpcHarness
from .pi_writer import PiSessionWriter

REPO = Path(__file__).resolve().parents[2]
PI_EXECUTABLE = Path(os.environ.get("TESS_PI_EXECUTABLE", REPO / "var" / "node" / "node_modules" / ".bin" / "pi"))


@pytest.fixture
def pi(tmp_path: Path) -> PiHarness:
    return PiHarness(tmp_path, "pi-local")


@pytest.fixture
def pi_rpc(tmp_path: Path) -> Iterator[PiRpcHarness]:
    harness = PiRpcHarness(tmp_path, "pi-rpc")
    yield harness
    harness.close()


def ref_of(provider: PiProvider, scope: Scope, session_id: str) -> RuntimeRef:
    return next(s.ref for s in provider.list_sessions(scope) if s.ref.runtime_id == session_id)


def everything(provider: PiProvider, ref: RuntimeRef, scope: Scope, limit: int = 65536) -> list[OutputChunk]:
    chunks: list[OutputChunk] = []
    cursor = None
    while True:
        page = provider.stream_session(ref, cursor, scope, limit=limit)
        if not page.chunks:
            return chunks
        chunks.extend(page.chunks)
        cursor = page.next_cursor


def walk(node: RuntimeNode) -> list[RuntimeNode]:
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(current.children)
    return found


# --- the files ---------------------------------------------------------------------------------------


def test_the_writer_produces_version_3_files_with_hexadecimal_ids_and_parent_links(pi: PiHarness) -> None:
    writer = PiSessionWriter(pi.directory)
    first = writer.user("hello")
    second = writer.assistant("hi")

    lines = [json.loads(line) for line in writer.path.read_text().splitlines()]

    assert lines[0] | {"timestamp": "t"} == {
        "type": "session",
        "version": 3,
        "id": writer.id,
        "timestamp": "t",
        "cwd": str(pi.directory.absolute()),
    }
    assert [(line["id"], line["parentId"]) for line in lines[1:]] == [(first, None), (second, first)]
    assert all(len(line["id"]) == 8 and int(line["id"], 16) >= 0 for line in lines[1:])


def test_it_lists_only_pi_session_files_with_their_names(pi: PiHarness, system_scope: Scope) -> None:
    named = PiSessionWriter(pi.directory)
    named.user("first prompt")
    named.name("the name")
    unnamed = PiSessionWriter(pi.directory)
    unnamed.user("  what   is\nthis  ")
    (pi.directory / "legacy.jsonl").write_text('{"type":"session","version":1,"id":"old"}\n')
    (pi.directory / "noise.jsonl").write_text("not json\n")
    (pi.directory / "notes.txt").write_text("{}\n")

    titles = {s.ref.runtime_id: s.title for s in pi.provider.list_sessions(system_scope)}

    assert titles == {named.id: "the name", unnamed.id: "what is this"}


def test_the_tree_follows_parent_ids_with_branches_and_the_last_entry_as_leaf(
    pi: PiHarness, system_scope: Scope
) -> None:
    writer = PiSessionWriter(pi.directory)
    question = writer.user("question")
    old_answer = writer.assistant("old answer")
    writer.user("follow-up on the old answer")
    summary = writer.branch_summary(question, old_answer, "tried the old way")
    new_answer = writer.assistant("new answer")
    writer.label(question, "start here")
    ref = ref_of(pi.provider, system_scope, writer.id)

    [session] = pi.provider.get_session_tree(system_scope, ref)

    [root] = session.children
    assert (root.id, root.title, root.active) == (question, "start here", True)
    assert [(child.id, child.active) for child in root.children] == [(old_answer, False), (summary, True)]
    assert [node.id for node in root.children[1].children] == [new_answer]
    active = {node.id for node in walk(session) if node.active}
    assert active == {session.id, question, summary, new_answer, writer.leaf}


def test_a_long_conversation_builds_without_recursion(pi: PiHarness, system_scope: Scope) -> None:
    writer = PiSessionWriter(pi.directory)
    for number in range(3000):
        writer.user(f"turn {number}")

    [session] = pi.provider.get_session_tree(system_scope, ref_of(pi.provider, system_scope, writer.id))

    assert session.children[0].title == "turn 0"


# --- the stream ----------------------------------------------------------------------------------------


def test_each_message_ends_its_line_so_the_next_one_does_not_run_on_after_it(
    pi: PiHarness, system_scope: Scope
) -> None:
    writer = PiSessionWriter(pi.directory)
    writer.user("Split the pricing.")
    writer.assistant("Split done.\n")
    writer.assistant("")
    writer.assistant("Tests pass.")

    chunks = everything(pi.provider, ref_of(pi.provider, system_scope, writer.id), system_scope)

    assert "".join(chunk.data for chunk in chunks) == "Split the pricing.\nSplit done.\nTests pass.\n"


def test_a_compaction_entry_comes_out_as_a_checkpoint_between_the_texts(pi: PiHarness, system_scope: Scope) -> None:
    writer = PiSessionWriter(pi.directory)
    kept = writer.user("keep this")
    writer.assistant("answer")
    writer.model_change()
    writer.thinking()
    writer.custom()
    compaction = writer.compaction("we talked about X", kept, tokens_before=12345)
    writer.custom_message("shown", display=True)
    writer.custom_message("hidden", display=False)
    writer.assistant("after")

    chunks = everything(pi.provider, ref_of(pi.provider, system_scope, writer.id), system_scope)

    assert [(chunk.data, chunk.checkpoint is not None) for chunk in chunks] == [
        ("keep this\n", False),
        ("answer\n", False),
        ("", True),
        ("shown\n", False),
        ("after\n", False),
    ]
    assert chunks[2].checkpoint == {
        "kind": "compaction",
        "entry_id": compaction,
        "summary": "we talked about X",
        "first_kept_entry_id": kept,
        "tokens_before": 12345,
    }
    assert chunks[2].source == compaction


def test_a_growing_file_is_followed_live_without_gaps_or_repeats(pi: PiHarness, system_scope: Scope) -> None:
    writer = PiSessionWriter(pi.directory)
    ref = ref_of(pi.provider, system_scope, writer.id)
    texts = [f"entry {number} ✓\n" for number in range(200)]
    expected = "".join(texts)

    def write() -> None:
        for text in texts:
            writer.assistant(text)

    thread = threading.Thread(target=write)
    state: dict[str, Any] = {"cursor": None, "text": ""}

    def step() -> bool:
        page = pi.provider.stream_session(ref, state["cursor"], system_scope, limit=11)
        state["text"] += "".join(chunk.data for chunk in page.chunks)
        state["cursor"] = page.next_cursor
        assert not page.ended
        return len(state["text"].encode()) >= len(expected.encode())

    thread.start()
    # Each poll reads one page of 11 entries, so the polling pace, not the writer, bounds how fast it follows.
    wait_for(step, "the whole growing file", interval=0.02)
    thread.join()

    assert state["text"] == expected


def test_a_line_still_being_written_is_not_read_until_it_is_complete(pi: PiHarness, system_scope: Scope) -> None:
    writer = PiSessionWriter(pi.directory)
    writer.assistant("done")
    ref = ref_of(pi.provider, system_scope, writer.id)
    line = json.dumps(
        {
            "type": "message",
            "id": "0badc0de",
            "parentId": writer.leaf,
            "timestamp": "x",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "late"}]},
        }
    )
    writer.partial(line[:20])

    first = pi.provider.stream_session(ref, None, system_scope)
    writer.partial(line[20:] + "\n")
    second = pi.provider.stream_session(ref, first.next_cursor, system_scope)

    assert [chunk.data for chunk in first.chunks] == ["done\n"]
    assert [chunk.data for chunk in second.chunks] == ["late\n"]


@pytest.mark.parametrize("cursor", ["-1.0", "1.x", "1.0.not/an/id"])
def test_a_malformed_cursor_is_refused(pi: PiHarness, system_scope: Scope, cursor: str) -> None:
    writer = PiSessionWriter(pi.directory)
    writer.assistant("abc")
    ref = ref_of(pi.provider, system_scope, writer.id)

    with pytest.raises(InvalidInput):
        pi.provider.stream_session(ref, cursor, system_scope)


@pytest.mark.parametrize("cursor", ["1.0", "0.5", "99999999.0"])
def test_a_cursor_that_names_no_entry_is_lost_not_read_from(pi: PiHarness, system_scope: Scope, cursor: str) -> None:
    writer = PiSessionWriter(pi.directory)
    writer.assistant("abc")
    ref = ref_of(pi.provider, system_scope, writer.id)

    with pytest.raises(CursorLost):
        pi.provider.stream_session(ref, cursor, system_scope)


def test_a_cursor_whose_entry_before_changed_is_lost(pi: PiHarness, system_scope: Scope) -> None:
    """The file was rewritten with the same line lengths but other entries: the offset alone would fit."""
    writer = PiSessionWriter(pi.directory)
    first = writer.assistant("abc")
    writer.assistant("def")
    ref = ref_of(pi.provider, system_scope, writer.id)
    page = pi.provider.stream_session(ref, None, system_scope, limit=4)
    assert [c.data for c in page.chunks] == ["abc\n"] and page.next_cursor.endswith("." + first)

    writer.path.write_text(writer.path.read_text().replace(first, "0" * len(first)))

    with pytest.raises(CursorLost):
        pi.provider.stream_session(ref, page.next_cursor, system_scope)


# --- references and health ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "identity",
    [
        {"file": "../elsewhere/x.jsonl"},
        {"file": "/etc/passwd.jsonl"},
        {"file": "missing.jsonl"},
        {"sessions_dir": "/tmp"},
    ],
)
def test_a_reference_outside_its_directory_is_not_found(
    pi: PiHarness, system_scope: Scope, identity: dict[str, str]
) -> None:
    ref = pi.start(system_scope, "alpha")
    forged = RuntimeRef(instance=ref.instance, runtime_id=ref.runtime_id, identity={**ref.identity, **identity})

    with pytest.raises(RuntimeNotFound):
        pi.provider.stream_session(forged, None, system_scope)


def test_a_file_replaced_by_another_session_no_longer_answers_to_the_old_reference(
    pi: PiHarness, system_scope: Scope
) -> None:
    ref = pi.start(system_scope, "alpha")
    path = pi.directory / ref.identity["file"]
    other = PiSessionWriter(pi.directory)
    path.write_bytes(other.path.read_bytes())

    with pytest.raises(RuntimeNotFound):
        pi.provider.stream_session(ref, None, system_scope)


def test_health_reports_the_directory_and_its_sessions_and_fails_without_it(
    pi: PiHarness, tmp_path: Path, system_scope: Scope
) -> None:
    pi.start(system_scope, "alpha")
    missing = PiProvider(name="gone", config={"kind": "pi", "sessions_dir": str(tmp_path / "nope")})

    health = pi.provider.health()

    assert health.ok and health.detail["sessions"] == 1 and health.detail["rpc"] is False
    assert health.heartbeat_at is not None
    assert not missing.health().ok
    assert missing.health().detail["error"] == "sessions_dir_unreadable"


def test_without_an_executable_steering_and_aborting_fail_closed(pi: PiHarness, system_scope: Scope) -> None:
    ref = pi.start(system_scope, "alpha")

    for call in (
        lambda: pi.provider.steer(ref, "go left", system_scope),
        lambda: pi.provider.abort(ref, system_scope),
        lambda: pi.provider.attach(ref, AttachMode.INTERACTIVE, system_scope),
    ):
        with pytest.raises(CapabilityUnsupported):
            call()


# --- RPC ---------------------------------------------------------------------------------------------


def test_rpc_sends_steers_and_aborts_and_the_stream_shows_what_pi_wrote(
    pi_rpc: PiRpcHarness, system_scope: Scope
) -> None:
    ref = pi_rpc.start(system_scope, "alpha")
    tricky = "line one\nline two \u2028 still one record \u2029 ✓"

    pi_rpc.provider.send_message(ref, tricky, "key-1", system_scope)
    pi_rpc.provider.steer(ref, "go left", system_scope)
    pi_rpc.provider.abort(ref, system_scope)

    assert pi_rpc.received(ref) == f"{tricky}\nsteer:go left\nabort\n"
    assert [chunk.data for chunk in everything(pi_rpc.provider, ref, system_scope)] == [tricky + "\n"]
    assert pi_rpc.provider.list_sessions(system_scope)[0].status == "running"
    assert pi_rpc.provider.health().detail["rpc_processes"] == 1


def test_an_rpc_process_that_dies_is_started_again_on_the_next_send(pi_rpc: PiRpcHarness, system_scope: Scope) -> None:
    ref = pi_rpc.start(system_scope, "alpha")
    pi_rpc.provider.send_message(ref, "one", "key-1", system_scope)
    pi_rpc.provider.close()

    pi_rpc.provider.send_message(ref, "two", "key-2", system_scope)

    assert pi_rpc.received(ref) == "one\ntwo\n"


def _idle(provider: PiProvider, ref: RuntimeRef, seconds: float = 3600) -> RpcProcess:
    """Make ``ref``'s RPC process look as if nothing happened on it for ``seconds``."""
    process = provider._processes[ref.runtime_id]
    process.last_used_at -= seconds
    process.last_event_at = None
    return process


def test_an_idle_rpc_process_is_stopped_and_the_next_send_starts_a_new_one(tmp_path: Path, system_scope: Scope) -> None:
    harness = PiRpcHarness(tmp_path, "idle", idle_seconds=60)
    try:
        alpha, beta = harness.start(system_scope, "alpha"), harness.start(system_scope, "beta")
        harness.provider.send_message(alpha, "one", "key-1", system_scope)
        harness.provider.send_message(beta, "busy", "key-2", system_scope)
        idle = _idle(harness.provider, alpha)
        assert harness.provider.health().detail["rpc_processes"] == 1  # alpha stopped, beta kept
        assert not idle.alive() and alpha.runtime_id not in harness.provider._processes
        harness.provider.send_message(alpha, "two", "key-3", system_scope)  # a new process, nothing lost
        assert harness.received(alpha) == "one\ntwo\n"
        assert harness.provider.health().detail["rpc_processes"] == 2
    finally:
        harness.close()


def test_an_idle_process_whose_agent_is_still_working_is_kept(tmp_path: Path, system_scope: Scope) -> None:
    harness = PiRpcHarness(tmp_path, "busy", idle_seconds=60, env={"PI_PEER_STREAMING": "1"})
    try:
        alpha = harness.start(system_scope, "alpha")
        harness.provider.send_message(alpha, "a long task", "key-1", system_scope)
        process = _idle(harness.provider, alpha)
        assert harness.provider.health().detail["rpc_processes"] == 1
        assert process.alive() and harness.provider._processes[alpha.runtime_id] is process
        assert process.idle_for(process.last_used_at) == 0  # asked now: not asked again until idle again
    finally:
        harness.close()


def test_idle_seconds_zero_keeps_every_process_and_a_bad_value_is_refused(tmp_path: Path, system_scope: Scope) -> None:
    harness = PiRpcHarness(tmp_path, "keep", idle_seconds=0)
    try:
        alpha = harness.start(system_scope, "alpha")
        harness.provider.send_message(alpha, "one", "key-1", system_scope)
        process = _idle(harness.provider, alpha, seconds=10**6)
        assert harness.provider.health().detail["rpc_processes"] == 1 and process.alive()
    finally:
        harness.close()
    for bad in (-1, "soon"):
        with pytest.raises(ImproperlyConfigured, match="idle_seconds"):
            PiProvider(name="bad", config={"kind": "pi", "sessions_dir": str(tmp_path), "idle_seconds": bad})


def test_an_rpc_process_inherits_only_what_it_is_given_of_tess_s_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, system_scope: Scope
) -> None:
    monkeypatch.setenv("TESS_TEST_SECRET", "not for agents")
    monkeypatch.setenv("TESS_TEST_MODEL_KEY", "for pi")
    harness = PiRpcHarness(tmp_path, "env", env={"PI_SETTING": "1"}, env_passthrough=["TESS_TEST_MODEL_KEY"])
    ref = harness.start(system_scope, "alpha")
    try:
        harness.provider.send_message(ref, "hi", "key-1", system_scope)
    finally:
        harness.close()

    names = json.loads(Path(str(harness.writers[ref.runtime_id].path) + ".env").read_text())
    assert {"PI_SETTING", "TESS_TEST_MODEL_KEY", "PATH"} <= set(names)
    assert "TESS_TEST_SECRET" not in names
    assert "DATABASE_URL" not in names


def test_an_executable_that_cannot_start_is_a_transient_provider_error(tmp_path: Path, system_scope: Scope) -> None:
    harness = PiHarness(tmp_path, "broken", executable=[str(tmp_path / "no-such-pi")])
    ref = harness.start(system_scope, "alpha")

    with pytest.raises(ProviderError) as failed:
        harness.provider.send_message(ref, "hi", "key-1", system_scope)

    assert failed.value.code == "provider_unavailable"


# --- the real pi executable (no model call) ----------------------------------------------------------


@pytest.fixture
def real_pi() -> Path:
    """The pi executable from ``tests/providers_app/install_pi.sh``; without it, CI fails and a local run
    skips, saying so."""
    if not PI_EXECUTABLE.exists():
        require_or_skip(f"PI EXECUTABLE NOT INSTALLED at {PI_EXECUTABLE}: run tests/providers_app/install_pi.sh")
    return PI_EXECUTABLE


def test_the_real_pi_reads_our_files_as_we_do_and_refuses_a_prompt_without_a_model(
    real_pi: Path, tmp_path: Path, system_scope: Scope
) -> None:
    home = {"HOME": str(tmp_path / "home"), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    harness = PiHarness(tmp_path, "pi-real", executable=[str(real_pi)], env=home, timeout=30)
    writer = PiSessionWriter(harness.directory)
    writer.name("alpha")
    question = writer.user("question")
    answer = writer.assistant("old answer")
    writer.compaction("summary", question)
    writer.branch_summary(question, answer, "abandoned")
    writer.user("after")
    ref = ref_of(harness.provider, system_scope, writer.id)
    rpc = RpcProcess(
        [str(real_pi), "--mode", "rpc", "--session", str(writer.path)],
        cwd=str(tmp_path),
        env={**os.environ, **home},
        timeout=30,
    )
    try:
        state = rpc.command({"type": "get_state"})
        messages = rpc.command({"type": "get_messages"})["messages"]
    finally:
        rpc.close()
    [session] = harness.provider.get_session_tree(system_scope, ref)
    on_path = [n for n in walk(session) if n.active and n.kind in ("message", "branch_summary")]

    try:
        with pytest.raises(ProviderError) as refused:
            harness.provider.send_message(ref, "hello", "key-1", system_scope)
    finally:
        harness.close()

    assert (state["sessionId"], state["sessionName"]) == (writer.id, "alpha")
    assert [m["role"] for m in messages] == ["user", "branchSummary", "user"]
    assert len(on_path) == state["messageCount"] == 3
    assert refused.value.code == "provider_error"  # pi answered and refused: no model was called
    entries = [json.loads(line) for line in writer.path.read_text().splitlines()[1:]]
    assert not any(
        e["type"] == "message" and e["message"]["role"] == "assistant" and e["id"] != answer for e in entries
    )


def test_a_send_retried_with_its_key_is_replayed_even_after_tess_restarted(
    pi_rpc: PiRpcHarness, system_scope: Scope, settings: Any, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path / "var"
    ref = pi_rpc.start(system_scope, "alpha")
    first = pi_rpc.provider.send_message(ref, "deploy the fix", "key-1", system_scope)
    assert not first.replayed

    restarted = PiProvider(name=pi_rpc.name, config=pi_rpc.config)  # a new process: nothing in memory
    try:
        again = restarted.send_message(ref, "deploy the fix", "key-1", system_scope)
        other = restarted.send_message(ref, "deploy the fix", "key-2", system_scope)  # same text, another key
    finally:
        restarted.close()

    assert again.replayed and again.provider_message_id == first.provider_message_id
    [entry] = [
        e for e in pi_files.read_entries(pi_rpc.writers[ref.runtime_id].path) if e["id"] == again.provider_message_id
    ]
    assert entry["message"] == {"role": "user", "content": "deploy the fix", "timestamp": entry["message"]["timestamp"]}
    assert not other.replayed and other.provider_message_id not in ("", first.provider_message_id, ref.runtime_id)
    assert pi_rpc.received(ref) == "deploy the fix\ndeploy the fix\n"  # once per key


def test_a_key_recorded_whose_entry_never_reached_the_file_is_sent_again(
    pi_rpc: PiRpcHarness, system_scope: Scope, settings: Any, tmp_path: Path
) -> None:
    """Tess recorded the key and died before pi got the prompt: the retry finds no entry and sends it."""
    from providers_app.pi_keys import KeyLedger

    settings.VAR_DIR = tmp_path / "var"
    ref = pi_rpc.start(system_scope, "alpha")
    with KeyLedger(pi_rpc.name, ref.runtime_id).locked() as ledger:
        ledger.record("key-9", text="restart the worker", offset=pi_rpc.writers[ref.runtime_id].path.stat().st_size)

    retried = pi_rpc.provider.send_message(ref, "restart the worker", "key-9", system_scope)

    assert not retried.replayed
    assert pi_rpc.received(ref) == "restart the worker\n"
    assert pi_rpc.provider.send_message(ref, "restart the worker", "key-9", system_scope).replayed
    assert pi_rpc.received(ref) == "restart the worker\n"
