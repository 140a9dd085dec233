"""The ``pi`` model adapter: the real pi (tests/providers_app/install_pi.sh) against the local chat-completions
stand-in over real HTTP. Multi-turn context through pi's session file, streamed deltas, abort, reported usage,
no tool ever run, and pi's copy of a conversation forgotten on request."""

from __future__ import annotations

import itertools
import json
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from providers_app.contract import ProviderUnavailable
from providers_app.http_cancel import CancelEvent
from providers_app.model_adapters import (
    ModelError,
    ModelReply,
    ModelRequest,
    ModelStopped,
    ModelTimeout,
    ModelUnavailable,
    Prompt,
    get_model_adapter,
    registered_model_adapters,
)
from providers_app.pi_model import _KEPT, KEY_ENV, PiModelAdapter, pi_conversation_reset, pi_processes_close
from providers_app.pi_rpc import RpcProcess
from tests.conftest import require_or_skip
from tests.providers_app.chat_standin import ChatStandIn, _text, running_chat_standin, usage_of
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
PI_EXECUTABLE = Path(os.environ.get("TESS_PI_EXECUTABLE", REPO / "var" / "node" / "node_modules" / ".bin" / "pi"))
POLICY = "You are Tess. Answer briefly."
API_KEY = "sk-pi-model-test-key"


@pytest.fixture
def pi_executable() -> Path:
    """The pi executable from ``tests/providers_app/install_pi.sh``; without it, CI fails and a local run
    skips."""
    if not os.access(PI_EXECUTABLE, os.X_OK):
        require_or_skip(f"PI EXECUTABLE NOT INSTALLED at {PI_EXECUTABLE}: run tests/providers_app/install_pi.sh")
    return PI_EXECUTABLE


@pytest.fixture
def chat_standin() -> Iterator[ChatStandIn]:
    with running_chat_standin() as standin:
        yield standin


@pytest.fixture(autouse=True)
def _no_pi_kept_across_tests() -> Iterator[None]:
    yield
    pi_processes_close()


def adapter_for(
    standin: ChatStandIn,
    root: Path,
    executable: Path,
    *,
    model: str = "gpt-5.6-sol",
    timeout: float = 60.0,
    keep_seconds: float = 60.0,
    keep_max: int = 4,
) -> PiModelAdapter:
    return PiModelAdapter(
        keep_seconds=keep_seconds,
        keep_max=keep_max,
        executable=[str(executable)],
        root=root,
        base_url=standin.base_url,
        api_key=API_KEY,
        model=model,
        reasoning_effort="high",
        timeout=timeout,
        context_tokens=272_000,
    )


def request_for(
    session_id: str | None,
    text: str,
    conversation: tuple[dict[str, str], ...] = (),
    **more: Any,
) -> ModelRequest:
    live = {"session": {"id": session_id, "title": "work"}} if session_id else {}
    prompt = Prompt(stable_prefix=POLICY, dynamic="## Live state\n{}", user_text=text, conversation=conversation)
    return ModelRequest(prompt=prompt, intent="conversation", live=live, **more)


def sent(standin: ChatStandIn, index: int = -1) -> list[dict[str, str]]:
    """The messages of one request the stand-in received, each as role and text."""
    return [
        {"role": m["role"], "content": _text(m.get("content"))} for m in standin.requests[index]["body"]["messages"]
    ]


def turns(messages: list[dict[str, str]]) -> list[tuple[str, str]]:
    """The conversation of a request after pi's system prompt, the operator's messages cut to their text (a
    turn's dynamic section goes before it)."""
    return [
        (m["role"], m["content"].rsplit("## The operator's message\n", 1)[-1] if m["role"] == "user" else m["content"])
        for m in messages[1:]
    ]


def session_header(root: Path, session_id: str) -> dict[str, Any]:
    return json.loads((root / "sessions" / f"{session_id}.jsonl").read_text().splitlines()[0])


# --- registration and settings ----------------------------------------------------------------------------


def test_pi_is_a_registered_adapter_chosen_by_its_name(tmp_path):
    assert "pi" in registered_model_adapters()
    chosen = {"TESS_MODEL_ADAPTER": "pi", "TESS_MODEL": "gpt-5.6-sol", "TESS_REASONING_LEVEL": "high"}
    with override_settings(**chosen, TESS_MODEL_BASE_URL="http://127.0.0.1:9/v1", TESS_PI_MODEL_DIR=tmp_path):
        adapter = get_model_adapter()
    assert isinstance(adapter, PiModelAdapter)
    assert (adapter.model, adapter.thinking, adapter.root) == ("gpt-5.6-sol", "high", tmp_path)


def test_the_settings_accept_pi_with_gpt_5_6_sol_and_high_reasoning_by_default():
    from tess_site.settings.derived import model_adapter, model_name, reasoning_level
    from tess_site.settings.production import production_problems

    env = {"TESS_MODEL_ADAPTER": "pi"}
    assert [model_adapter(env), model_name(env), reasoning_level(env)] == ["pi", "gpt-5.6-sol", "high"]
    base = {
        "SECRET_KEY": "k" * 50,
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/tess",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        "ALLOWED_HOSTS": "tess.example",
    }
    problems = " ".join(production_problems({**base, **env, "TESS_PI_EXECUTABLE": str(PI_EXECUTABLE)}))
    assert "TESS_MODEL_BASE_URL" in problems and "the pi adapter is selected" in problems
    assert "TESS_PI_EXECUTABLE" not in problems or not os.access(PI_EXECUTABLE, os.X_OK)
    missing = " ".join(production_problems({**base, **env, "TESS_PI_EXECUTABLE": "/nonexistent/pi --flag"}))
    assert "TESS_PI_EXECUTABLE (the pi command, not found" in missing


def test_tess_writes_pi_s_models_json_in_its_own_agent_dir_without_the_key(tmp_path, pi_executable, chat_standin):
    adapter = adapter_for(chat_standin, tmp_path, pi_executable)
    reply = adapter.complete(request_for(str(uuid.uuid4()), "hello"))
    assert reply.text == "stand-in answer to: ## Live state\n{}\n\n## The operator's message\nhello"
    models = json.loads((tmp_path / "agent" / "models.json").read_text())
    provider = models["providers"]["tess"]
    assert provider["baseUrl"] == chat_standin.base_url
    assert provider["api"] == "openai-completions"
    assert provider["apiKey"] == KEY_ENV  # the name of a variable only the pi process gets
    assert provider["models"][0]["id"] == "gpt-5.6-sol"
    assert provider["models"][0]["reasoning"] is True
    # The key went over HTTP, and is in no file Tess or pi wrote.
    assert chat_standin.requests[0]["auth"] == f"Bearer {API_KEY}"
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert API_KEY not in path.read_text(errors="replace"), path
    body = chat_standin.requests[0]["body"]
    assert body["model"] == "gpt-5.6-sol"
    assert body["reasoning_effort"] == "high"
    assert _text(body["messages"][0]["content"]).startswith(POLICY)  # the stable prefix is pi's system prompt


# --- the conversation through pi ---------------------------------------------------------------------------


def test_a_second_turn_carries_the_first_through_pi_s_session_file(tmp_path, pi_executable, chat_standin):
    adapter, session_id = adapter_for(chat_standin, tmp_path, pi_executable), str(uuid.uuid4())
    first = adapter.complete(request_for(session_id, "which sessions failed overnight?"))
    header, kept = session_header(tmp_path, session_id), _KEPT.pid_of(session_id)
    assert kept is not None
    conversation = (
        {"role": "user", "content": "which sessions failed overnight?"},
        {"role": "assistant", "content": first.text},
    )
    second = adapter.complete(request_for(session_id, "what did I just ask you?", conversation))
    assert turns(sent(chat_standin)) == [
        ("user", "which sessions failed overnight?"),
        ("assistant", first.text),
        ("user", "what did I just ask you?"),
    ]
    assert second.text.endswith("what did I just ask you?")
    # pi continued its own file (its replay, its compaction), not one written again from Tess's conversation,
    # and the process kept from the first turn answered the second.
    assert session_header(tmp_path, session_id) == header
    assert _KEPT.pid_of(session_id) == kept


def test_a_first_turn_through_pi_starts_from_tess_s_conversation(tmp_path, pi_executable, chat_standin):
    adapter = adapter_for(chat_standin, tmp_path, pi_executable)
    conversation = (
        {"role": "system", "content": "## Summary of the earlier conversation\nthe operator asked about builds"},
        {"role": "user", "content": "pin the deploy runbook"},
        {"role": "assistant", "content": "Pinned."},
        {"role": "system", "content": "Approval 7 was approved."},
    )
    adapter.complete(request_for(str(uuid.uuid4()), "and now?", conversation))
    assert turns(sent(chat_standin)) == [
        ("user", "## Summary of the earlier conversation\nthe operator asked about builds"),
        ("user", "pin the deploy runbook"),
        ("assistant", "Pinned."),
        ("user", "Approval 7 was approved."),
        ("user", "and now?"),
    ]


def test_a_conversation_with_no_reply_yet_goes_with_the_turn_and_pi_writes_one_file(
    tmp_path, pi_executable, chat_standin
):
    adapter, session_id = adapter_for(chat_standin, tmp_path, pi_executable), str(uuid.uuid4())
    conversation = ({"role": "system", "content": "Approval 7 was approved."},)
    adapter.complete(request_for(session_id, "what happened?", conversation))
    (only,) = sent(chat_standin)[1:]
    assert only["content"].startswith("## Earlier in this conversation\n- Meanwhile: Approval 7 was approved.\n")
    assert only["content"].endswith("## The operator's message\nwhat happened?")
    entries = [json.loads(line) for line in (tmp_path / "sessions" / f"{session_id}.jsonl").read_text().splitlines()]
    assert [entry["type"] for entry in entries].count("session") == 1


def test_pi_s_own_compaction_applies_to_the_next_turn(tmp_path, pi_executable, chat_standin):
    adapter, session_id = adapter_for(chat_standin, tmp_path, pi_executable), str(uuid.uuid4())
    adapter.context_tokens = 4096  # below pi's reserve for the reply: pi compacts after every turn
    first = adapter.complete(request_for(session_id, "first"))
    entries = [json.loads(line) for line in (tmp_path / "sessions" / f"{session_id}.jsonl").read_text().splitlines()]
    assert entries[-1]["type"] == "compaction"  # made before the turn's pi process was closed
    conversation = ({"role": "user", "content": "first"}, {"role": "assistant", "content": first.text})
    adapter.complete(request_for(session_id, "second", conversation))
    answers = [sent(chat_standin, i) for i in range(len(chat_standin.requests))]
    messages = [m for m in answers if m[0]["content"].startswith(POLICY)][-1]  # not pi's summary requests
    assert turns(messages)[-1] == ("user", "second")
    assert messages[1]["content"].startswith("The conversation history before this point was compacted")
    assert entries[-1]["summary"] in messages[1]["content"]


def test_turns_answered_without_pi_reach_pi_once_before_the_next(tmp_path, pi_executable, chat_standin):
    adapter, session_id = adapter_for(chat_standin, tmp_path, pi_executable), str(uuid.uuid4())
    first = adapter.complete(request_for(session_id, "first"))
    kept = _KEPT.pid_of(session_id)
    conversation = (
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": first.text},
        {"role": "user", "content": "remember the deploy window is 9pm"},  # an action: no model call
        {"role": "assistant", "content": "Memory card parked."},
    )
    adapter.complete(request_for(session_id, "third", conversation))
    assert turns(sent(chat_standin)) == [
        ("user", "first"),
        ("assistant", first.text),
        ("user", "remember the deploy window is 9pm"),
        ("assistant", "Memory card parked."),
        ("user", "third"),
    ]
    # The kept process did not know the appended turns: a new one read the file.
    assert _KEPT.pid_of(session_id) not in (None, kept)


def test_a_conversation_that_no_longer_shows_pi_s_last_turn_is_written_again(tmp_path, pi_executable, chat_standin):
    adapter, session_id = adapter_for(chat_standin, tmp_path, pi_executable), str(uuid.uuid4())
    adapter.complete(request_for(session_id, "my password is hunter2"))
    header = session_header(tmp_path, session_id)
    redacted = ({"role": "user", "content": "[redacted]"}, {"role": "assistant", "content": "[redacted]"})
    adapter.complete(request_for(session_id, "next", redacted))
    assert turns(sent(chat_standin)) == [("user", "[redacted]"), ("assistant", "[redacted]"), ("user", "next")]
    assert session_header(tmp_path, session_id) != header
    assert "hunter2" not in (tmp_path / "sessions" / f"{session_id}.jsonl").read_text()


def test_pi_conversation_reset_forgets_pi_s_copy_and_the_next_turn_starts_from_tess_s(
    tmp_path, pi_executable, chat_standin
):
    adapter, session_id = adapter_for(chat_standin, tmp_path, pi_executable), str(uuid.uuid4())
    adapter.complete(request_for(session_id, "the vault code is 4321"))
    pi_file = tmp_path / "sessions" / f"{session_id}.jsonl"
    assert "4321" in pi_file.read_text()
    kept = _KEPT.pid_of(session_id)
    assert kept is not None
    with override_settings(TESS_PI_MODEL_DIR=tmp_path):
        assert pi_conversation_reset(session_id) is True
        assert not pi_file.exists()
        assert _KEPT.pid_of(session_id) is None  # nor does a pi process keep it in memory
        assert not Path(f"/proc/{kept}").exists() or "zombie" in Path(f"/proc/{kept}/status").read_text()
        assert pi_conversation_reset(session_id) is False  # nothing left to forget
        assert pi_conversation_reset(str(uuid.uuid4())) is False
    conversation = (
        {"role": "user", "content": "the vault code is [forgotten]"},
        {"role": "assistant", "content": "[forgotten]"},
    )
    adapter.complete(request_for(session_id, "what is the code?", conversation))
    assert "4321" not in json.dumps(chat_standin.requests[-1]["body"])
    assert "4321" not in pi_file.read_text()
    assert turns(sent(chat_standin))[0] == ("user", "the vault code is [forgotten]")


def test_a_reset_during_a_turn_is_honoured_by_the_next_one(tmp_path, pi_executable, chat_standin):
    adapter, session_id = adapter_for(chat_standin, tmp_path, pi_executable, model="held"), str(uuid.uuid4())
    replies: list[ModelReply] = []
    running = threading.Thread(target=lambda: replies.append(adapter.complete(request_for(session_id, "secret 99"))))
    running.start()
    wait_for(lambda: chat_standin.requests, timeout=60, what="pi to call the model")
    with override_settings(TESS_PI_MODEL_DIR=tmp_path):
        assert pi_conversation_reset(session_id) is True  # a turn is writing it
    chat_standin.release.set()
    running.join(timeout=60)
    assert replies and replies[0].text.endswith("secret 99")
    written = session_header(tmp_path, session_id)  # by the turn that ran across the reset
    # The conversation still ends in that turn, which would otherwise continue pi's copy.
    conversation = ({"role": "user", "content": "secret 99"}, {"role": "assistant", "content": replies[0].text})
    adapter.complete(request_for(session_id, "next", conversation))
    assert session_header(tmp_path, session_id) != written
    assert not (tmp_path / "sessions" / f"{session_id}.reset").exists()


def test_a_process_per_turn_when_none_is_kept_and_the_least_recent_goes_beyond_the_limit(
    tmp_path, pi_executable, chat_standin
):
    once = adapter_for(chat_standin, tmp_path, pi_executable, keep_seconds=0)
    session_id = str(uuid.uuid4())
    once.complete(request_for(session_id, "hello"))
    assert _KEPT.pid_of(session_id) is None
    adapter = adapter_for(chat_standin, tmp_path, pi_executable, keep_max=1)
    older, newer = str(uuid.uuid4()), str(uuid.uuid4())
    adapter.complete(request_for(older, "one"))
    adapter.complete(request_for(newer, "two"))
    assert _KEPT.pid_of(older) is None
    assert _KEPT.pid_of(newer) is not None


def test_a_kept_process_does_not_answer_once_the_key_or_endpoint_changed(tmp_path, pi_executable, chat_standin):
    adapter, session_id = adapter_for(chat_standin, tmp_path, pi_executable), str(uuid.uuid4())
    first = adapter.complete(request_for(session_id, "one"))
    kept = _KEPT.pid_of(session_id)
    adapter.api_key = "sk-rotated"
    conversation = ({"role": "user", "content": "one"}, {"role": "assistant", "content": first.text})
    adapter.complete(request_for(session_id, "two", conversation))
    assert chat_standin.requests[-1]["auth"] == "Bearer sk-rotated"
    assert _KEPT.pid_of(session_id) not in (None, kept)
    assert turns(sent(chat_standin))[0] == ("user", "one")  # the new process read the same file


def test_pi_conversation_reset_refuses_an_id_that_is_not_a_session_s(settings, tmp_path):
    settings.TESS_PI_MODEL_DIR = tmp_path
    (tmp_path / "sessions").mkdir()
    with pytest.raises(ValueError):
        pi_conversation_reset("../agent/models")


def test_two_turns_of_one_session_at_once_take_turns_on_its_pi_file(tmp_path, pi_executable, chat_standin):
    adapter, session_id = adapter_for(chat_standin, tmp_path, pi_executable), str(uuid.uuid4())
    replies: list[str] = []
    threads = [
        threading.Thread(target=lambda text=text: replies.append(adapter.complete(request_for(session_id, text)).text))
        for text in ("one", "two")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(replies) == 2
    entries = [json.loads(line) for line in (tmp_path / "sessions" / f"{session_id}.jsonl").read_text().splitlines()]
    # One chain: every entry's parent is the entry before it (no turn wrote over or beside the other).
    chain = [entry for entry in entries if entry["type"] != "session"]
    assert all(entry["parentId"] == before["id"] for before, entry in itertools.pairwise(chain))


# --- streaming, stop, usage ---------------------------------------------------------------------------------


def test_deltas_arrive_in_order_before_the_model_has_finished(tmp_path, pi_executable, chat_standin):
    chat_standin.drip_seconds = 0.2
    adapter = adapter_for(chat_standin, tmp_path, pi_executable, model="drip")
    deltas: list[str] = []
    finished_at_first: list[bool] = []

    def on_delta(piece: str) -> None:
        if not deltas:
            finished_at_first.append(chat_standin.finished.is_set())
        deltas.append(piece)

    reply = adapter.complete(request_for(str(uuid.uuid4()), "one two three four", on_delta=on_delta))
    assert finished_at_first == [False]
    assert "".join(deltas) == reply.text
    assert len(deltas) > 5
    assert reply.text.endswith("one two three four")


def test_stop_aborts_pi_mid_reply_and_keeps_the_text_so_far(tmp_path, pi_executable, chat_standin):
    chat_standin.drip_seconds = 0.3
    adapter = adapter_for(chat_standin, tmp_path, pi_executable, model="drip")
    cancel, deltas = CancelEvent(), []

    def on_delta(piece: str) -> None:
        deltas.append(piece)
        if len(deltas) == 2:
            cancel.set()

    words = " ".join(f"w{i}" for i in range(40))
    session_id = str(uuid.uuid4())
    with pytest.raises(ModelStopped) as stopped:
        adapter.complete(request_for(session_id, words, on_delta=on_delta, cancel=cancel))
    assert stopped.value.text == "".join(deltas)
    assert stopped.value.text.startswith("stand-in answer ")
    assert not stopped.value.text.endswith(words)
    wait_for(chat_standin.disconnected.is_set, timeout=30, what="the stand-in to see its connection closed")
    assert not chat_standin.finished.is_set()
    # The stopped turn is where pi's copy continues from.
    chat_standin.drip_seconds = 0.0
    conversation = ({"role": "user", "content": words}, {"role": "assistant", "content": stopped.value.text})
    adapter.complete(request_for(session_id, "go on", conversation))
    assert turns(sent(chat_standin))[-1] == ("user", "go on")
    assert turns(sent(chat_standin))[0] == ("user", words)


def test_pi_s_reported_usage_becomes_the_reply_s(tmp_path, pi_executable, chat_standin):
    reply = adapter_for(chat_standin, tmp_path, pi_executable).complete(request_for(None, "count me"))
    assert reply.usage is not None
    # The stand-in reports a word a token, and reasoning tokens when a reasoning effort was asked for.
    assert reply.usage.output_tokens == usage_of(chat_standin.requests[-1]["body"], reply.text)["completion_tokens"]
    assert reply.usage.input_tokens > 0
    assert reply.usage.cost is None  # the models.json Tess writes has no prices: the ledger prices it
    assert (reply.adapter, reply.model) == ("pi", "gpt-5.6-sol")


# --- no tools ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["bash", "write", "edit"])
def test_a_tool_call_the_model_asks_for_changes_no_file(tmp_path, pi_executable, chat_standin, tool):
    target = tmp_path / "outside" / "marker"
    target.parent.mkdir()
    arguments = {
        "bash": {"command": f"touch {target} && echo ran > {target}.bash"},
        "write": {"path": str(target), "content": "written by the model"},
        "edit": {"path": str(target), "oldText": "", "newText": "edited"},
    }[tool]
    adapter = adapter_for(chat_standin, tmp_path / "pi", pi_executable, model=f"tool-{tool}")
    reply = adapter.complete(request_for(str(uuid.uuid4()), json.dumps(arguments)))
    assert list(target.parent.iterdir()) == []
    assert reply.text == f"stand-in saw the tool result: Tool {tool} not found"
    # No tool was offered to the model in the first place.
    assert all(not request["body"].get("tools") for request in chat_standin.requests)


def test_pi_runs_with_no_tools_in_an_empty_directory_and_none_of_tess_s_environment(
    tmp_path, chat_standin, monkeypatch
):
    monkeypatch.setenv("DATABASE_URL", "postgres://tess:db-secret@db/tess")
    monkeypatch.setenv("SECRET_KEY", "django-secret")
    seen = tmp_path / "seen"
    fake = tmp_path / "pi-that-reports"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {seen}.argv\nenv > {seen}.env\npwd > {seen}.cwd\n')
    fake.chmod(0o755)
    root = tmp_path / "pi-model"
    with pytest.raises(ModelUnavailable):
        adapter_for(chat_standin, root, fake).complete(request_for(str(uuid.uuid4()), "hello"))
    argv = Path(f"{seen}.argv").read_text().split("\n")
    for flag in ("--no-tools", "--no-extensions", "--no-skills", "--no-context-files", "--no-prompt-templates"):
        assert flag in argv
    assert argv[argv.index("--mode") + 1] == "rpc"
    assert argv[argv.index("--provider") + 1] == "tess"
    env = dict(line.split("=", 1) for line in Path(f"{seen}.env").read_text().splitlines() if "=" in line)
    assert env["PI_CODING_AGENT_DIR"] == str(root / "agent")
    assert env["HOME"] == str(root / "home")
    assert env[KEY_ENV] == API_KEY
    assert "DATABASE_URL" not in env and "SECRET_KEY" not in env
    assert Path(f"{seen}.cwd").read_text().strip() == str(root / "work")
    assert list((root / "work").iterdir()) == []


# --- failures ------------------------------------------------------------------------------------------------


def test_a_missing_pi_is_model_unavailable(tmp_path, chat_standin):
    adapter = adapter_for(chat_standin, tmp_path, tmp_path / "no-pi-here")
    with pytest.raises(ModelUnavailable):
        adapter.complete(request_for(str(uuid.uuid4()), "hello"))


def test_a_command_to_a_pi_whose_output_has_ended_fails_at_once_not_at_the_timeout(tmp_path):
    """The reader saw pi's stdout end before the command was sent: nothing will answer it, so it is refused
    as gone at once rather than waited on until the timeout says pi "did not answer in time"."""
    # A pi that has closed its stdout but still runs: its stdin takes the command, and nothing will answer.
    process = RpcProcess(["sh", "-c", "exec >&-; sleep 30"], cwd=str(tmp_path), env={}, timeout=20)
    try:
        process._reader.join(timeout=30)
        assert not process._reader.is_alive()
        with pytest.raises(ProviderUnavailable, match="gone"):
            process.request({"type": "get_state"})
    finally:
        process.process.kill()
        process.process.wait(timeout=10)


def test_a_pi_that_dies_mid_turn_is_model_unavailable(tmp_path, chat_standin):
    fake = tmp_path / "pi-that-dies"
    fake.write_text(
        '#!/bin/sh\nread line\necho \'{"type":"response","id":"tess-1","command":"prompt","success":true}\'\n'
    )
    fake.chmod(0o755)
    with pytest.raises(ModelUnavailable):
        adapter_for(chat_standin, tmp_path, fake).complete(request_for(str(uuid.uuid4()), "hello"))


def test_an_endpoint_error_is_a_typed_model_error_and_pi_s_copy_is_dropped(tmp_path, pi_executable, chat_standin):
    session_id = str(uuid.uuid4())
    with pytest.raises(ModelError) as failed:
        adapter_for(chat_standin, tmp_path, pi_executable, model="error-500").complete(request_for(session_id, "hi"))
    assert type(failed.value) is ModelError
    assert failed.value.details.get("status") == 500
    assert not (tmp_path / "sessions" / f"{session_id}.jsonl").exists()


def test_an_unreachable_endpoint_is_model_unavailable(tmp_path, pi_executable, chat_standin):
    adapter = adapter_for(chat_standin, tmp_path, pi_executable)
    adapter.base_url = "http://127.0.0.1:9/v1"
    with pytest.raises(ModelUnavailable):
        adapter.complete(request_for(str(uuid.uuid4()), "hi"))


def test_a_model_slower_than_the_timeout_is_model_timeout(tmp_path, pi_executable, chat_standin):
    adapter = adapter_for(chat_standin, tmp_path, pi_executable, model="held", timeout=8)
    try:
        with pytest.raises(ModelTimeout):
            adapter.complete(request_for(str(uuid.uuid4()), "hi"))
    finally:
        chat_standin.release.set()


# --- through the gateway ---------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_with_the_pi_adapter_a_follow_up_through_the_api_is_answered_with_the_earlier_turn(
    cast, api_as, tmp_path, pi_executable, chat_standin
):
    from sessions_app.gateway_prompt import STABLE_PREFIX
    from tests.factories import SessionFactory

    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    client = api_as(cast.owner)

    def turn(text: str) -> dict[str, Any]:
        response = client.post(
            f"/api/v1/sessions/{session.pk}/turns/",
            {"text": text},
            format="json",
            headers={"Idempotency-Key": uuid.uuid4().hex},
        )
        assert response.status_code == 200, response.content
        return dict(response.json())

    chosen = {
        "TESS_MODEL_ADAPTER": "pi",
        "TESS_MODEL": "gpt-5.6-sol",
        "TESS_MODEL_BASE_URL": chat_standin.base_url,
        "TESS_MODEL_API_KEY": API_KEY,
        "TESS_MODEL_TIMEOUT_SECONDS": 60,
        "TESS_PI_EXECUTABLE": str(pi_executable),
        "TESS_PI_MODEL_DIR": tmp_path,
    }
    with override_settings(**chosen):
        first = turn("which sessions failed overnight?")
        header, kept = session_header(tmp_path, str(session.pk)), _KEPT.pid_of(str(session.pk))
        second = turn("what did I just ask you?")
    assert first["reply"].startswith("stand-in answer to: ## ")  # pi's answer, not the deterministic one
    assert first["reply"].endswith("which sessions failed overnight?")
    assert second["reply"].endswith("what did I just ask you?")
    requests = [sent(chat_standin, index) for index in range(len(chat_standin.requests))]
    assert len(requests) == 2
    assert all(messages[0]["content"].startswith(STABLE_PREFIX) for messages in requests)
    assert turns(requests[1]) == [
        ("user", "which sessions failed overnight?"),
        ("assistant", first["reply"]),
        ("user", "what did I just ask you?"),
    ]
    assert "## Live state" in requests[1][-1]["content"]  # this turn's dynamic section, beside its text
    assert session_header(tmp_path, str(session.pk)) == header  # pi went on with its own file
    assert kept is not None and _KEPT.pid_of(str(session.pk)) == kept  # in the process kept from the first turn
