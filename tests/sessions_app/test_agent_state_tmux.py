"""A tmux agent's state, as the pump derives it from real tmux: announced once per change, on the row too."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils.dateparse import parse_datetime

from providers_app.contract import AgentObservation, AgentState
from providers_app.registry import get_provider, reset_instances
from sessions_app import services
from sessions_app.models import Session
from tess_site.accounts import services as accounts
from tess_site.scope import Role
from tests.conftest import Cast, scope_of
from tests.waiting import wait_for

from .agent_state_helpers import WORK, announced, configure, pump_for, pump_until, pump_until_state, run_script
from .conftest import TmuxInstance

pytestmark = pytest.mark.django_db

PROMPT_SCRIPT = (
    'cd "$1"\n'
    + WORK.format(flag="ask")
    + "printf 'Continue? [y/N] '\n"
    + "read -r answer\n"
    + 'echo "answer: $answer"\n'
    + 'while :; do echo "working again $((i=i+1))"; sleep 0.2; done\n'
)


def test_work_then_a_prompt_is_waiting_and_answering_it_is_working_again(
    cast: Cast, tmux: TmuxInstance, settings: Any, tmp_path: Path
) -> None:
    provider = configure(settings, tmux)
    session = run_script(cast, provider, tmp_path, PROMPT_SCRIPT)
    pump_until_state(session, "working")

    (tmp_path / "ask").touch()
    waiting = pump_until_state(session, "waiting_for_input")
    provider.send_message(session.runtime_ref, "y", "answer-1", scope_of(cast.owner, cast.acme))
    working = pump_until_state(session, "working")

    assert announced(working) == ["working", "waiting_for_input", "working"]
    assert waiting.agent_state_since is not None and working.agent_state_since is not None
    assert working.agent_state_since > waiting.agent_state_since
    last = session.events.filter(kind="status").order_by("-seq").first()
    assert last is not None and last.body["status"] == "running"
    assert parse_datetime(last.body["since"]) == working.agent_state_since
    assert working.status == "running"


def test_a_shell_at_its_prompt_is_idle(cast: Cast, tmux: TmuxInstance, settings: Any, tmp_path: Path) -> None:
    provider = configure(settings, tmux)
    session = run_script(cast, provider, tmp_path, "exec bash --norc --noprofile -i\n")
    idle = pump_until_state(session, "idle")
    assert announced(idle)[-1] == "idle"
    assert "waiting_for_input" not in announced(idle)


@pytest.mark.parametrize(("code", "state"), [(3, "error"), (0, "ended")])
def test_a_command_that_exits_is_an_error_unless_its_status_is_zero(
    cast: Cast, tmux: TmuxInstance, settings: Any, tmp_path: Path, code: int, state: str
) -> None:
    provider = configure(settings, tmux)
    script = 'cd "$1"\n' + WORK.format(flag="stop") + f"exit {code}\n"
    session = run_script(cast, provider, tmp_path, script, remain=True)
    pump_until_state(session, "working")
    (tmp_path / "stop").touch()
    done = pump_until_state(session, state)
    pump_for([session], 2.0)  # later looks at the same dead pane add nothing

    assert announced(Session.objects.get(pk=done.pk)) == ["working", state]


def test_a_dead_pane_whose_process_still_runs_is_unknown_until_it_exits_with_its_status(
    cast: Cast, tmux: TmuxInstance, settings: Any, tmp_path: Path
) -> None:
    """tmux calls a pane dead once nothing holds its terminal (the hang-up it then sends is ignored here), but
    learns how it ended only when the process is reaped: asked in between, the honest answer is unknown."""
    provider = configure(settings, tmux)
    script = 'cd "$1"\n' + WORK.format(flag="detach") + "trap '' HUP; exec </dev/null >/dev/null 2>&1\n"
    script += WORK.format(flag="stop") + "exit 4\n"
    session = run_script(cast, provider, tmp_path, script, remain=True)
    scope = scope_of(cast.owner, cast.acme)
    (tmp_path / "detach").touch()

    def look(done: Callable[[AgentObservation], bool]) -> AgentObservation | None:
        observation = provider.agent_state(session.runtime_ref, scope)
        return observation if done(observation) else None

    detached = wait_for(lambda: look(lambda o: o.state == AgentState.UNKNOWN), "the pane to read dead")
    assert detached.reason == "exit status not known yet"
    (tmp_path / "stop").touch()
    ended = wait_for(lambda: look(lambda o: o.state != AgentState.UNKNOWN), "the exit status")
    assert (ended.state, ended.reason) == (AgentState.ERROR, "exited with status 4")


@pytest.mark.parametrize(
    "script",
    [
        "exec watch -n 0.2 date\n",
        # A redraw whose cursor line even reads like a prompt: output never stops, so it is not a question.
        "while :; do clear; date; printf 'Continue? [y/N] '; sleep 0.2; done\n",
    ],
    ids=["watch", "redraw-with-prompt-text"],
)
def test_a_full_screen_program_that_keeps_redrawing_never_reads_as_waiting(
    cast: Cast, tmux: TmuxInstance, settings: Any, tmp_path: Path, script: str
) -> None:
    provider = configure(settings, tmux)
    session = run_script(cast, provider, tmp_path, script)
    pump_until_state(session, "working")
    pump_for([session], 6.0)  # several debounce periods

    fresh = Session.objects.get(pk=session.pk)
    assert announced(fresh) == ["working"]
    assert fresh.agent_state_seen != "waiting_for_input"


FLASH_SCRIPT = (
    'cd "$1"\n'
    + WORK.format(flag="ask")
    + "printf 'Continue? [y/N] '\n"
    + "while [ ! -e go ]; do sleep 0.05; done\n"
    + "echo\n"
    + WORK.format(flag="ask-again")
    + "printf 'Continue? [y/N] '\n"
    + "read -r answer\n"
)


def test_a_prompt_shorter_than_the_debounce_is_not_announced(
    cast: Cast, tmux: TmuxInstance, settings: Any, tmp_path: Path
) -> None:
    provider = configure(settings, tmux, debounce_seconds=4)
    session = run_script(cast, provider, tmp_path, FLASH_SCRIPT)
    pump_until_state(session, "working")

    (tmp_path / "ask").touch()
    pump_until(session, lambda s: s.agent_state_seen == "waiting_for_input", "the prompt to be seen")
    (tmp_path / "go").touch()  # answered well within the debounce: the prompt was a flash
    pump_until(session, lambda s: s.agent_state_seen == "", "the prompt to be gone")
    assert announced(Session.objects.get(pk=session.pk)) == ["working"]

    (tmp_path / "ask-again").touch()  # this one stays: announced once it has held for the debounce
    held = pump_until_state(session, "waiting_for_input")
    assert announced(held) == ["working", "waiting_for_input"]


def test_a_session_whose_runtime_is_gone_ends_with_one_status_event(
    cast: Cast, tmux: TmuxInstance, settings: Any, tmp_path: Path
) -> None:
    provider = configure(settings, tmux)
    session = run_script(cast, provider, tmp_path, 'cd "$1"\n' + WORK.format(flag="stop"))
    pump_until_state(session, "working")
    (tmp_path / "stop").touch()  # no remain-on-exit: the session closes with its only pane
    ended = pump_until(session, lambda s: s.status == "exited", "the session to exit")
    services.session_pump(session_id=session.pk)

    assert ended.agent_state == "ended"
    assert announced(ended) == ["working", "ended"]


def test_the_demo_agent_works_asks_and_works_again_once_answered(
    cast: Cast, tmux_pair: tuple[TmuxInstance, TmuxInstance], settings: Any
) -> None:
    demo, agent = tmux_pair
    settings.TESS_RUNTIME_PROVIDERS = {
        "demo": demo.config(),
        "demo-agent": agent.config(command=["sh", "-c", settings.DEMO_AGENT_SCRIPT]),
    }
    reset_instances()
    tenant = accounts.tenant_create(slug="demo")
    operator, _ = accounts.user_ensure(username="operator")
    accounts.membership_grant(tenant=tenant, user=operator, role=Role.OPERATOR)
    call_command("tess_demo_session", stdout=io.StringIO())
    session = Session.objects.get(provider_instance="demo-agent")
    assert Session.objects.filter(provider_instance="demo").count() == 1

    pump_until_state(session, "working")
    pump_until_state(session, "waiting_for_input")
    get_provider("demo-agent").send_message(session.runtime_ref, "y", "answer-1", scope_of(operator, tenant))
    again = pump_until_state(session, "working")
    assert announced(again) == ["working", "waiting_for_input", "working"]
    reset_instances()
