"""A scripted fleet of tmux agents with known true states: every announced state is the true one, once.

Twenty sessions run the same script on one tmux server: work (a line every quarter second), a
``Continue? [y/N]`` question answered by raw input, more work, and in the end a shell at its prompt, an exit
with an error, a clean exit, or still working. The test is the fleet's operator: it moves each session to
its next true state after a while (each session on its own schedule, 5 to 9 seconds a state, about two
minutes in all), once the state it is in has been announced, and pumps the whole fleet all along as the
beat does: a round every ``TESS_PUMP_INTERVAL_MS``.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from providers_app.tmux import TmuxProvider
from sessions_app import services
from sessions_app.models import Session
from tests.conftest import Cast, scope_of

from .agent_state_helpers import announced, configure, run_script
from .conftest import TmuxInstance

pytestmark = pytest.mark.django_db

FLEET = 20
FINALS = ("idle", "error", "ended", "working")
GIVE_UP_SECONDS = 45.0  # a true state not announced by then is a failure

FLEET_SCRIPT = """cd "$1"
n=0
while :; do
  while [ ! -e "next-$n" ]; do echo "step $n.$((i=i+1))"; sleep 0.25; done
  case $(cat "next-$n") in
    ask) printf 'Continue? [y/N] '; read -r answer ;;
    idle) exec bash --norc --noprofile -i ;;
    error) exit 4 ;;
    ended) exit 0 ;;
  esac
  n=$((n+1))
done
"""


@dataclass
class Agent:
    session: Session
    workdir: Path
    plan: list[tuple[str, float]]  # the true states still to come, each with how long it lasts at least
    truth: list[str] = field(default_factory=lambda: ["working"])
    changed_at: list[float] = field(default_factory=lambda: [time.time()])
    entered: float = field(default_factory=time.monotonic)
    hold: float = 5.0
    step: int = 0
    answers: int = 0

    def order(self, what: str) -> None:
        """The script's next move (written whole, then renamed: the script never reads half a word)."""
        partial = self.workdir / f".next-{self.step}"
        partial.write_text(what)
        os.rename(partial, self.workdir / f"next-{self.step}")
        self.step += 1


def plan_for(index: int, rng: random.Random) -> list[tuple[str, float]]:
    plan: list[tuple[str, float]] = []
    for _ in range(rng.randint(4, 6)):
        plan += [("waiting_for_input", rng.uniform(5, 9)), ("working", rng.uniform(5, 9))]
    final = FINALS[index % len(FINALS)]
    if final != "working":
        plan.append((final, 0.0))
    return plan


def advance(agent: Agent, provider: TmuxProvider, cast: Cast) -> None:
    state, hold = agent.plan.pop(0)
    if state == "waiting_for_input":
        agent.order("ask")
    elif agent.truth[-1] == "waiting_for_input":
        agent.answers += 1
        provider.send_message(
            agent.session.runtime_ref, "y", f"answer-{agent.answers}", scope_of(cast.owner, cast.acme)
        )
    else:
        agent.order(state)
    agent.truth.append(state)
    agent.changed_at.append(time.time())
    agent.entered, agent.hold = time.monotonic(), hold


def test_a_fleet_of_twenty_reports_every_true_change_once_and_nothing_else(
    cast: Cast, tmux: TmuxInstance, settings: Any, tmp_path: Path
) -> None:
    provider = configure(settings, tmux)
    rng = random.Random(1130)
    agents = [
        Agent(
            session=run_script(cast, provider, tmp_path / f"agent-{i}", FLEET_SCRIPT, remain=True),
            workdir=tmp_path / f"agent-{i}",
            plan=plan_for(i, rng),
            hold=rng.uniform(5, 9),
        )
        for i in range(FLEET)
    ]
    every = settings.TESS_PUMP_INTERVAL_MS / 1000  # the beat's pace (sessions_app.tasks.pump_sessions)
    while any(a.plan or Session.objects.get(pk=a.session.pk).agent_state != a.truth[-1] for a in agents):
        started = time.monotonic()
        for agent in agents:
            services.session_pump(session_id=agent.session.pk)
        for agent in agents:
            current = Session.objects.get(pk=agent.session.pk).agent_state
            waited = time.monotonic() - agent.entered
            assert current == agent.truth[-1] or waited < GIVE_UP_SECONDS, (
                f"{agent.session.title}: {agent.truth[-1]} not announced after {GIVE_UP_SECONDS} s: {current}"
            )
            if agent.plan and current == agent.truth[-1] and waited >= agent.hold:
                advance(agent, provider, cast)
        time.sleep(max(0.0, started + every - time.monotonic()))

    false_waiting, wrong = 0, []
    lags: list[float] = []
    for agent in agents:
        reported = announced(Session.objects.get(pk=agent.session.pk))
        false_waiting += sum(
            1 for said, true in zip(reported, agent.truth, strict=False) if said == "waiting_for_input" != true
        )
        if reported != agent.truth:
            wrong.append(f"{agent.session.title}: reported {reported}, true {agent.truth}")
        events = agent.session.events.filter(kind="status").order_by("seq")[1:]
        for event, changed in zip(events, agent.changed_at, strict=False):
            assert event.ts.timestamp() >= changed, "a state was announced before it was true"
            if event.body["agent_state"] == "waiting_for_input":
                lags.append(event.ts.timestamp() - changed)
    changes = sum(len(agent.truth) for agent in agents)
    median = statistics.median(lags)
    print(f"fleet: {changes} true states, {len(lags)} questions, waiting announced after a median {median:.2f} s")
    assert false_waiting == 0
    assert wrong == []
