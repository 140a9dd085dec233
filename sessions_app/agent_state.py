"""Which agent-state change the pump announces: the debounce over what providers observe.

A provider says what its runtime shows at each look (``AgentRuntimeProvider.agent_state``). A new state is
announced once it has held for the provider's debounce (a prompt flashed between redraws is not a question),
a question counted from when the runtime says it began;
``error`` and ``ended`` are facts and are announced at once; ``unknown`` only once the provider has been unable
to tell for ``UNKNOWN_HOLD_SECONDS`` (a dead pane whose exit status tmux has not collected yet is a moment's
doubt, not a state worth showing). The state the runtime shows but has not yet
held long enough is kept on the session row (``agent_state_seen``), so the debounce holds across pump
processes. Pure: the caller writes the returned fields and the ``status`` event in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from providers_app.contract import FINAL_AGENT_STATES, AgentState

UNKNOWN_HOLD_SECONDS = 10.0


@dataclass(frozen=True)
class Step:
    fields: dict[str, Any]  # the session row's fields to write (empty: nothing changed)
    announce: bool  # a new ``agent_state`` to announce with a ``status`` event


def step(
    *,
    current: str,
    current_since: datetime | None,
    seen: str,
    seen_since: datetime | None,
    observed: AgentState,
    observed_since: datetime | None,
    now: datetime,
    debounce: float,
) -> Step:
    """The change after observing ``observed`` at ``now``, given the row's announced and pending states.

    A question's debounce counts from when the runtime says it began (``observed_since``; tmux: its last
    output); every other state's from the first look that saw it, so a runtime that stalls for a moment is
    not taken at its word at once. The runtime's start becomes the announced ``since``, never earlier than
    the announced state's own start.
    """
    if observed == current:
        return Step({"agent_state_seen": "", "agent_state_seen_since": None} if seen else {}, announce=False)
    if observed != seen or seen_since is None:
        seen_since = now
    began = min(observed_since or seen_since, seen_since)
    if current_since is not None:
        began = max(began, current_since)
    # A question is direct evidence (a prompt at the cursor), so it has stood since the runtime says it began;
    # any other state is inferred (a shell in the foreground is also a script sleeping between two lines)
    # and must hold from the first look that saw it.
    held_from = began if observed == AgentState.WAITING_FOR_INPUT else seen_since
    hold = max(debounce, UNKNOWN_HOLD_SECONDS) if observed == AgentState.UNKNOWN else debounce
    if observed in FINAL_AGENT_STATES or now - held_from >= timedelta(seconds=hold):
        fields = {
            "agent_state": observed.value,
            "agent_state_since": began,
            "agent_state_seen": "",
            "agent_state_seen_since": None,
        }
        return Step(fields, announce=True)
    if observed == seen:
        return Step({}, announce=False)
    return Step({"agent_state_seen": observed.value, "agent_state_seen_since": seen_since}, announce=False)
