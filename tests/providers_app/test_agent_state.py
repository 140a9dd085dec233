"""Each provider's agent state comes from what its runtime says: pi's RPC state and session file, Hermes's
run status, the last message of a Matrix room; and the tmux screen rules on their own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from providers_app.contract import AgentState
from providers_app.tmux_state import PaneFacts, PaneRules, classify
from tess_site.scope import Scope
from tests.waiting import wait_for

from .hermes_harness import HermesHarness
from .matrix_harness import MatrixHarness
from .pi_harness import PiHarness, PiRpcHarness
from .synapse import Synapse

# --- pi ----------------------------------------------------------------------------------------------


def test_pi_over_rpc_is_working_while_it_streams_and_idle_once_it_answered(tmp_path: Path, system_scope: Scope) -> None:
    harness = PiRpcHarness(tmp_path, "turns", env={"PI_PEER_TURNS": "1"})
    try:
        ref = harness.start(system_scope, "alpha")
        assert harness.provider.agent_state(ref, system_scope).state == AgentState.IDLE
        harness.provider.send_message(ref, "refactor the parser", "key-1", system_scope)
        assert harness.provider.agent_state(ref, system_scope).state == AgentState.WORKING
        assert harness.provider.agent_state(ref, system_scope).state == AgentState.WORKING  # still streaming

        Path(str(harness.writers[ref.runtime_id].path) + ".finish").touch()
        assert harness.provider.agent_state(ref, system_scope).state == AgentState.IDLE
    finally:
        harness.close()


def test_pi_without_a_process_reads_the_session_file_s_last_message(tmp_path: Path, system_scope: Scope) -> None:
    harness = PiHarness(tmp_path, "files")
    try:
        ref = harness.start(system_scope, "alpha")
        writer = harness.writers[ref.runtime_id]

        def state() -> AgentState:
            return harness.provider.agent_state(ref, system_scope).state

        assert state() == AgentState.IDLE
        writer.user("add a test")
        assert state() == AgentState.WORKING  # a turn under way, written just now
        writer.assistant("added")
        assert state() == AgentState.IDLE
        writer.user("and another")
        writer.append("message", message={"role": "assistant", "content": [], "stopReason": "error"})
        assert state() == AgentState.ERROR
    finally:
        harness.close()


def test_pi_an_unfinished_turn_nobody_writes_to_any_more_is_unknown(tmp_path: Path, system_scope: Scope) -> None:
    harness = PiHarness(tmp_path, "stale", active_seconds=0)
    try:
        ref = harness.start(system_scope, "alpha")
        harness.writers[ref.runtime_id].user("a question pi never answered")
        assert harness.provider.agent_state(ref, system_scope).state == AgentState.UNKNOWN
    finally:
        harness.close()


# --- Hermes ------------------------------------------------------------------------------------------


def test_hermes_follows_the_latest_run_s_status(tmp_path: Path, system_scope: Scope) -> None:
    harness = HermesHarness(tmp_path, "runs")
    provider, standin = harness.provider, harness.standin
    try:
        ref = harness.start(system_scope, "alpha")
        assert provider.agent_state(ref, system_scope).state == AgentState.IDLE

        run = provider.send_message(ref, "summarise the logs", "key-1", system_scope).provider_message_id
        assert provider.agent_state(ref, system_scope).state == AgentState.WORKING
        standin.finish_run(run, "done")
        assert provider.agent_state(ref, system_scope).state == AgentState.IDLE

        failing = provider.send_message(ref, "deploy", "key-2", system_scope).provider_message_id
        with standin.condition:
            standin.runs[failing]["status"] = "failed"
            standin._event(failing, "run.failed", status="failed")
        assert provider.agent_state(ref, system_scope).state == AgentState.ERROR

        provider.terminate(ref, "approval-1", system_scope)
        assert provider.agent_state(ref, system_scope).state == AgentState.ENDED
    finally:
        harness.close()


def test_hermes_a_question_with_no_run_tess_knows_of_is_unknown(tmp_path: Path, system_scope: Scope) -> None:
    harness = HermesHarness(tmp_path, "foreign")
    try:
        ref = harness.start(system_scope, "alpha")
        harness.standin.add_message(ref.runtime_id, "user", "asked from elsewhere")
        assert harness.provider.agent_state(ref, system_scope).state == AgentState.UNKNOWN
        harness.standin.add_message(ref.runtime_id, "assistant", "answered")
        assert harness.provider.agent_state(ref, system_scope).state == AgentState.IDLE
    finally:
        harness.close()


# --- Matrix ------------------------------------------------------------------------------------------


@pytest.fixture
def matrix(synapse: Synapse, tmp_path: Path) -> Iterator[MatrixHarness]:
    harness = MatrixHarness(tmp_path, "state", synapse)
    yield harness
    harness.close()


def test_matrix_is_working_after_tess_spoke_and_idle_after_the_agent_answered(
    matrix: MatrixHarness, system_scope: Scope
) -> None:
    harness, provider = matrix, matrix.provider
    ref = harness.start(system_scope, "alpha")

    def state() -> AgentState:
        return provider.agent_state(ref, system_scope).state

    assert state() == AgentState.IDLE  # no messages yet
    provider.send_message(ref, "please review PR 7", "key-1", system_scope)
    assert state() == AgentState.WORKING
    harness.emit(ref, b"reviewed: two nits")
    wait_for(lambda: state() == AgentState.IDLE, "the agent's answer to be the last message")
    provider.terminate(ref, "approval-1", system_scope)
    assert state() == AgentState.ENDED


# --- the tmux screen rules ---------------------------------------------------------------------------

RULES = PaneRules.from_config({}, "t")


def facts(screen: list[str], *, command: str = "node", cursor: int | None = None, quiet: float = 5.0) -> PaneFacts:
    return PaneFacts(
        dead=False,
        dead_status="",
        dead_signal="",
        command=command,
        screen=screen,
        cursor_y=len(screen) - 1 if cursor is None else cursor,
        quiet_for=quiet,
    )


@pytest.mark.parametrize(
    ("screen", "command"),
    [
        (["Overwrite config.yaml? [y/N] "], "python3"),
        (["Proceed (y/n)? "], "apt"),
        (["Press Enter to continue"], "bash"),
        (["[sudo] password for ada: "], "sudo"),
        (["? Project name: "], "node"),
        (
            [
                "│ Bash command                               │",
                "│   rm -rf build                             │",
                "│ Do you want to proceed?                    │",
                "│ ❯ 1. Yes                                   │",  # noqa: RUF001
                "│   2. No, and tell Claude what to do        │",
                "╰────────────────────────────────────────────╯",
                "",
            ],
            "claude",
        ),
        (
            ["Would you like to run the following command?", "", "  $ make test", "", "› 1. Yes, proceed", ""],  # noqa: RUF001
            "codex",
        ),
    ],
)
def test_prompts_of_common_shells_and_coding_agents_read_as_waiting(screen: list[str], command: str) -> None:
    assert classify(facts(screen, command=command), RULES).state == AgentState.WAITING_FOR_INPUT


@pytest.mark.parametrize(
    ("screen", "command"),
    [
        (["Continue? [y/N] y", "ada@host:~/src$ "], "bash"),  # answered; the shell's prompt is back
        (["Do you want to proceed?", "ada@host:~/src$ "], "zsh"),  # a question in a shell's history
        (["Continue? [y/N] y", "building step 4"], "make"),  # answered; the program works quietly
        (["Is this the right file?"], "less"),  # a question mark alone is not a prompt
    ],
)
def test_history_and_ordinary_questions_do_not_read_as_waiting(screen: list[str], command: str) -> None:
    assert classify(facts(screen, command=command), RULES).state != AgentState.WAITING_FOR_INPUT


@pytest.mark.parametrize(
    ("status", "signal", "state"),
    [
        ("0", "", AgentState.ENDED),
        ("2", "", AgentState.ERROR),
        ("", "15", AgentState.ERROR),
        ("", "", AgentState.UNKNOWN),
    ],
)
def test_a_dead_pane_is_ended_or_an_error_by_how_it_ended_and_unknown_until_tmux_knows(
    status: str, signal: str, state: AgentState
) -> None:
    dead = PaneFacts(dead=True, dead_status=status, dead_signal=signal, command="", screen=[], cursor_y=0, quiet_for=9)
    assert classify(dead, RULES).state == state


def test_a_prompt_on_a_screen_that_is_still_being_written_is_work() -> None:
    assert classify(facts(["Continue? [y/N] "], quiet=0.1), RULES).state == AgentState.WORKING


def test_own_waiting_patterns_replace_the_defaults_and_a_bad_one_is_refused() -> None:
    rules = PaneRules.from_config({"waiting_patterns": [r"^>>> $"]}, "t")
    assert classify(facts([">>> "], command="python3"), rules).state == AgentState.WAITING_FOR_INPUT
    assert classify(facts(["Continue? [y/N] "], command="python3"), rules).state == AgentState.WORKING
    with pytest.raises(ImproperlyConfigured):
        PaneRules.from_config({"waiting_patterns": ["(unclosed"]}, "t")
