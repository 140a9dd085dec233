"""What an approval page says about its action, in words, from the app that owns the target.

approvals_app knows an approval's action, target id and parameters, but not what a session is; the app that
registered the action's executor also registers a describer (from its ``wiring.py``) that turns the approval
into a sentence and, where it has one, the target's recent output. A describer reads only what the approval
names, for the approver bound to the link.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .models import Approval


@dataclass(frozen=True)
class ActionBrief:
    sentence: str  # "Terminate the session "demo" (tmux instance demo), started by operator 2 hours ago"
    output_lines: list[str] = field(default_factory=list)  # plain text, no control characters
    output_label: str = ""  # what the lines are, e.g. "The last 20 lines of the session's output"


ActionDescriber = Callable[[Approval], ActionBrief | None]

_describers: dict[str, ActionDescriber] = {}


def register_action_describer(action: str, describer: ActionDescriber) -> None:
    _describers[action] = describer


def describe(approval: Approval) -> ActionBrief:
    """The registered describer's brief, or a plain sentence built from the approval's own fields."""
    describer = _describers.get(approval.action)
    brief = describer(approval) if describer is not None else None
    if brief is not None:
        return brief
    verb = approval.action.rsplit(".", 1)[-1].replace("_", " ").capitalize()
    return ActionBrief(sentence=f"{verb} {approval.target_type} {approval.target_id}")
