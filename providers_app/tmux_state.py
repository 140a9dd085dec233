"""A tmux pane's agent state, from what tmux says about it: exit status, foreground command, the screen.

Order of the rules (the first that applies wins):

1. the pane is dead (``remain-on-exit``): exit status 0 is ``ended``, another status or a signal ``error``
   (while neither is known, ``unknown``: the provider first has tmux reap its exited children, so this is
   a process that closed its terminal and still runs);
2. it wrote output within ``quiet_seconds``: ``working`` (a program that keeps redrawing is busy, whatever
   its screen shows);
3. the cursor line matches a ``waiting_patterns`` entry (``Continue? [y/N]``, ``Press Enter``, a
   password prompt): ``waiting_for_input``; with a program other than a shell in the foreground, the lines
   just above the cursor are also matched against ``dialog_patterns`` (the question block of a coding
   agent's approval dialog);
4. a shell is in the foreground: ``idle`` (at its prompt);
5. otherwise a program runs quietly: ``working``.

Only the cursor line is matched for line prompts because a prompt waits with the cursor right after it: an
answered ``Continue? [y/N] y`` a line higher is history, not a question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from .contract import AgentObservation, AgentState

DEFAULT_WAITING_PATTERNS = (
    r"[\[(]\s*(y|yes)\s*/\s*(n|no)\s*[\])]",  # [y/N] (Y/n) [yes/no]
    r"\bcontinue\?",
    r"\bpress (enter|return|any key)\b",
    r"^\?\s+\S",  # an Inquirer-style question: "? Project name:"
    r"\b(password|passphrase)\b[^:]{0,60}:\s*$",  # sudo, ssh
)
DEFAULT_DIALOG_PATTERNS = (
    r"^\W*(do you want to|would you like to)\b.*\?\W*$",  # Claude Code / Codex approval questions
    r"^\W*allow\b.*\?\W*$",
    "^\\W*[\u276f\u203a>]\\s*1\\.\\s+yes\\b",  # a numbered menu whose first option, Yes, is selected
)
QUIET_STATES = frozenset({AgentState.WAITING_FOR_INPUT, AgentState.IDLE})
DEFAULT_SHELLS = ("bash", "zsh", "sh", "dash", "fish", "ksh", "mksh", "tcsh", "csh", "nu", "xonsh", "elvish", "pwsh")


@dataclass(frozen=True)
class PaneFacts:
    """What tmux said about a pane in one look."""

    dead: bool
    dead_status: str  # the exit status of a dead pane ("" when tmux does not know)
    dead_signal: str  # the signal that killed it ("" if none did)
    command: str  # #{pane_current_command}
    screen: Sequence[str]  # the visible lines (capture-pane -p)
    cursor_y: int
    quiet_for: float | None  # seconds since the pane last wrote output (None: unknown)


def _compile(patterns: Any, option: str, instance: str) -> tuple[re.Pattern[str], ...]:
    if not isinstance(patterns, (list, tuple)) or not all(isinstance(item, str) for item in patterns):
        raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{instance!r}][{option!r}] must be a list of regexes.")
    try:
        return tuple(re.compile(item, re.IGNORECASE) for item in patterns)
    except re.error as exc:
        raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{instance!r}][{option!r}]: {exc}") from None


def _number(config: dict[str, Any], option: str, default: float, instance: str) -> float:
    try:
        value = float(config.get(option, default))
    except (TypeError, ValueError):
        value = -1.0
    if value < 0:
        raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{instance!r}][{option!r}] must be 0 or more.")
    return value


@dataclass(frozen=True)
class PaneRules:
    waiting: tuple[re.Pattern[str], ...]
    dialog: tuple[re.Pattern[str], ...]
    shells: frozenset[str]
    quiet_seconds: float
    dialog_lines: int

    @classmethod
    def from_config(cls, config: dict[str, Any], instance: str) -> PaneRules:
        shells = config.get("shell_commands", DEFAULT_SHELLS)
        if not isinstance(shells, (list, tuple)) or not all(isinstance(item, str) for item in shells):
            raise ImproperlyConfigured(f"TESS_RUNTIME_PROVIDERS[{instance!r}]['shell_commands'] must be a list.")
        return cls(
            waiting=_compile(config.get("waiting_patterns", DEFAULT_WAITING_PATTERNS), "waiting_patterns", instance),
            dialog=_compile(config.get("dialog_patterns", DEFAULT_DIALOG_PATTERNS), "dialog_patterns", instance),
            shells=frozenset(shells),
            quiet_seconds=_number(config, "quiet_seconds", 1.0, instance),
            dialog_lines=int(_number(config, "dialog_lines", 6, instance)),
        )


def _is_shell(command: str, shells: frozenset[str]) -> bool:
    return command.lstrip("-") in shells  # a login shell shows as "-bash"


def classify(facts: PaneFacts, rules: PaneRules) -> AgentObservation:
    observation = _classify(facts, rules)
    if observation.state in QUIET_STATES and facts.quiet_for is not None:
        # A prompt or a shell's prompt began when the output stopped, not when Tess first looked.
        began = datetime.now(UTC) - timedelta(seconds=facts.quiet_for)
        return AgentObservation(observation.state, observation.reason, since=began)
    return observation


def _classify(facts: PaneFacts, rules: PaneRules) -> AgentObservation:
    if facts.dead:
        if facts.dead_status == "0":
            return AgentObservation(AgentState.ENDED, "exited with status 0")
        if facts.dead_status:
            return AgentObservation(AgentState.ERROR, f"exited with status {facts.dead_status}")
        if facts.dead_signal:
            return AgentObservation(AgentState.ERROR, f"killed by signal {facts.dead_signal}")
        # Dead, but tmux has not collected how it ended yet: neither an error nor a clean end, so far.
        return AgentObservation(AgentState.UNKNOWN, "exit status not known yet")
    if facts.quiet_for is not None and facts.quiet_for < rules.quiet_seconds:
        return AgentObservation(AgentState.WORKING, "writing output")
    shell = _is_shell(facts.command, rules.shells)
    cursor = facts.cursor_y if 0 <= facts.cursor_y < len(facts.screen) else len(facts.screen) - 1
    line = facts.screen[cursor] if cursor >= 0 else ""
    if any(pattern.search(line) for pattern in rules.waiting):
        return AgentObservation(AgentState.WAITING_FOR_INPUT, "a prompt at the cursor")
    if not shell and cursor >= 0:
        near = [text for text in facts.screen[max(cursor - rules.dialog_lines, 0) : cursor + 1] if text.strip()]
        if any(pattern.search(text) for text in near for pattern in rules.dialog):
            return AgentObservation(AgentState.WAITING_FOR_INPUT, "a question above the cursor")
    if shell:
        return AgentObservation(AgentState.IDLE, f"{facts.command} at its prompt")
    return AgentObservation(AgentState.WORKING, f"{facts.command} running")
