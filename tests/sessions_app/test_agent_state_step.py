"""The debounce over what providers observe (pure: no database, no runtime)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from providers_app.contract import AgentState
from sessions_app.agent_state import UNKNOWN_HOLD_SECONDS, step

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _look(observed, *, at=T0, seen="", seen_since=None, current_since=T0 - timedelta(minutes=1), began=None):
    """A look at ``at`` by a provider with a 1.5 s debounce; ``began``: when the runtime says the state began."""
    return step(
        current="working",
        current_since=current_since,
        seen=seen,
        seen_since=seen_since,
        observed=observed,
        observed_since=began,
        now=at,
        debounce=1.5,
    )


def test_a_moment_of_doubt_is_not_announced_but_lasting_doubt_is():
    first = _look(AgentState.UNKNOWN, at=T0)
    assert not first.announce
    assert first.fields["agent_state_seen"] == "unknown"
    later = _look(AgentState.UNKNOWN, at=T0 + timedelta(seconds=5), seen="unknown", seen_since=T0)
    assert not later.announce  # past the debounce, short of the hold for doubt
    settled = _look(AgentState.UNKNOWN, at=T0 + timedelta(seconds=UNKNOWN_HOLD_SECONDS), seen="unknown", seen_since=T0)
    assert settled.announce and settled.fields["agent_state"] == "unknown"


def test_a_dead_pane_whose_status_arrives_goes_straight_from_working_to_ended():
    assert not _look(AgentState.UNKNOWN, at=T0).announce
    ended = _look(AgentState.ENDED, at=T0 + timedelta(seconds=3), seen="unknown", seen_since=T0)
    assert ended.announce and ended.fields["agent_state"] == "ended"


def test_a_waiting_prompt_is_announced_after_the_debounce():
    assert not _look(AgentState.WAITING_FOR_INPUT, at=T0).announce
    held = _look(AgentState.WAITING_FOR_INPUT, at=T0 + timedelta(seconds=1.5), seen="waiting_for_input", seen_since=T0)
    assert held.announce and held.fields["agent_state"] == "waiting_for_input"


def test_a_quiet_pane_s_prompt_counts_its_hold_from_when_the_output_stopped():
    stopped = T0 - timedelta(seconds=1.6)  # what tmux says: the last output, before the first look
    held = _look(AgentState.WAITING_FOR_INPUT, began=stopped)
    assert held.announce and held.fields["agent_state_since"] == stopped


def test_a_prompt_that_has_not_stood_for_the_debounce_waits_for_the_next_look():
    early = _look(AgentState.WAITING_FOR_INPUT, began=T0 - timedelta(seconds=1.0))
    assert not early.announce and early.fields["agent_state_seen"] == "waiting_for_input"


def test_a_question_cannot_have_stood_since_before_the_announced_state_began():
    since = T0 - timedelta(seconds=0.5)
    look = _look(AgentState.WAITING_FOR_INPUT, began=T0 - timedelta(seconds=30), current_since=since)
    assert not look.announce  # it has stood only since working was announced, half a second


def test_an_inferred_state_holds_from_the_first_look_whatever_the_runtime_says():
    """A shell in the foreground after a quiet moment is also a script sleeping between two lines."""
    first = _look(AgentState.IDLE, began=T0 - timedelta(seconds=30))
    assert not first.announce
    held = _look(AgentState.IDLE, at=T0 + timedelta(seconds=1.5), seen="idle", seen_since=T0, began=T0)
    assert held.announce and held.fields["agent_state"] == "idle"
