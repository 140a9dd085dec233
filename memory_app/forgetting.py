"""What else must go when operator notes are forgotten or erased (seed 002: forget, forget-all and erasure
"delete … current bytes and matching lineage").

The note rows live here, but the operator's words also travel elsewhere: the session stream's ``turn.in``
("remember that …"), the replies that repeated them, and conversation summaries made from those turns. Those
belong to higher apps, which register a ``ForgetObserver`` at start-up (their ``wiring.py``). Every deleting
service calls ``forgotten_notify`` inside its own transaction, before the rows go, with the values being
forgotten; each observer redacts what it holds in that same transaction and returns how many items it
redacted, so the count is reported with the deleted rows and nothing commits half done.

An observer must not call out (network, subprocess, model) here: it runs inside the deleting transaction,
while the operator's category locks are held. Work that has to call out belongs in ``on_commit``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .policy import canonicalize


@dataclass(frozen=True)
class Forgotten:
    """The values of one operator's notes (every revision, and pending proposals) in one tenant, as the
    operator wrote them; ``everything``: forget-all or erasure rather than one slot."""

    tenant_id: int
    operator_id: int
    values: tuple[str, ...]
    everything: bool = False


ForgetObserver = Callable[[Forgotten], int]

_observers: list[ForgetObserver] = []


def register_forget_observer(observer: ForgetObserver) -> None:
    """Called from a higher app's ``wiring.py``: ``observer`` redacts what it holds of forgotten notes."""
    if observer not in _observers:
        _observers.append(observer)


def forgotten_values(values: list[str]) -> tuple[str, ...]:
    """The distinct, non-blank values, each once by its canonical form (the same note in two revisions is
    one value to look for)."""
    seen: dict[str, str] = {}
    for value in values:
        key = canonicalize(value)
        if key and key not in seen:
            seen[key] = value
    return tuple(seen.values())


def forgotten_notify(forgotten: Forgotten) -> int:
    """Let every observer redact ``forgotten``; the number of items redacted in all. Call inside the
    deleting transaction, before the rows are deleted."""
    if not forgotten.values:
        return 0
    return sum(observer(forgotten) for observer in list(_observers))
