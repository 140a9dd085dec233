"""A session's conversation as items (one per turn text or line between turns), newest first, and what each
process keeps of the conversations it read.

Every answer reads its session's conversation since the newest summary, up to its token budget, and counts
the tokens of each item. Between two turns of a session only a few events are added, so each process keeps
the items it read per session (``TESS_CONVERSATION_CACHE_SESSIONS``, least recently used first out) and
reads only the events after them. What it keeps is the whole conversation after one summary, so it is
used only while all of this holds, and otherwise read again:

- the session's ``conversation_version`` is the one read with it: the version moves when a summary is
  stored or the conversation is redacted, the two ways it changes other than by new events at its end;
- the newest summary is the same, and the tokens were counted for the same model;
- it is no longer than ``CACHE_BUDGETS`` budgets (a conversation that long is left to the database).

Nothing is lost by the cut between the kept items and the new events: a session's events become visible in
the order of their sequence numbers (they are appended under its row lock), so no event older than the
newest kept one can appear later.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.conf import settings

from providers_app.model_tokens import MESSAGE_OVERHEAD

from . import selectors, stream

HANDOFF_RESULT_CHARS = 300
CACHE_BUDGETS = 4  # at most this many token budgets of conversation kept per session


class Item(NamedTuple):
    """One message of the conversation: a turn's text or a line about what happened between turns (a tuple:
    every answer makes up to a budget's worth of them)."""

    seq: int
    role: str  # user, assistant, system
    text: str
    tokens: int
    status: bool = False  # a line made from a status event (repeated ones are one line)

    def message(self) -> dict[str, str]:
        return {"role": self.role, "content": self.text}

    def line(self) -> str:
        who = {"user": "Operator", "assistant": "Tess"}.get(self.role, "Meanwhile")
        return f"- {who}: {' '.join(self.text.split())}"


def _between_line(kind: str, body: dict[str, Any]) -> str:
    status = str(body.get("status") or "")
    if kind == stream.EventKind.APPROVAL:
        return f"Approval {body.get('id') or '?'} was {status}."
    if kind == stream.EventKind.HANDOFF:
        result = " ".join(str(body.get("result") or "").split())
        if len(result) > HANDOFF_RESULT_CHARS:
            result = result[: HANDOFF_RESULT_CHARS - 1] + "…"
        return f"Hand-off {body.get('id') or '?'} {status}" + (f": {result}" if result else ".")
    return "The session was terminated." if status == "terminated" else f"The session {status}."


def items_of(events: Iterable[tuple[int, str, Any]], count: Callable[[str], int]) -> Iterator[Item]:
    """The conversation's items of ``events`` (newest first), newest first; a status line repeated by later
    status events is one line. (Written flat: every answer reads up to a budget's worth of them,
    bench/b_prompt.py.)"""
    turn_in, turn_out, status_kind = (
        str(stream.EventKind.TURN_IN),
        str(stream.EventKind.TURN_OUT),
        str(stream.EventKind.STATUS),
    )
    held: Item | None = None  # a status line, given out once the next older line is known to differ
    for seq, kind, raw in events:
        body = raw if isinstance(raw, dict) else {}
        if kind in (turn_in, turn_out):
            text = body.get("text")
            if not isinstance(text, str) or not text or text.isspace():
                continue
            item = Item(seq, "user" if kind == turn_in else "assistant", text, count(text) + MESSAGE_OVERHEAD)
        else:
            line = _between_line(kind, body)
            item = Item(seq, "system", line, count(line) + MESSAGE_OVERHEAD, kind == status_kind)
        if held is not None:
            if item.status and item.text == held.text:
                held = item  # the same end announced again: keep the earliest
                continue
            yield held
            held = None
        if item.status:
            held = item
        else:
            yield item
    if held is not None:
        yield held


@dataclass(frozen=True)
class _Kept:
    key: tuple[int, int, str]  # conversation_version, the summary's last seq (0: none), the model counted for
    last_seq: int  # the newest conversation event read
    items: tuple[Item, ...]  # every item after the summary up to last_seq, newest first


_kept: OrderedDict[uuid.UUID, _Kept] = OrderedDict()
_kept_lock = threading.Lock()


def _events_read(events: Iterable[tuple[int, str, Any]], newest: list[int]) -> Iterator[tuple[int, str, Any]]:
    for event in events:
        newest[0] = max(newest[0], event[0])
        yield event


def conversation_items(
    *, session_id: uuid.UUID, version: int, after: int, model: str, count: Callable[[str], int], budget: int
) -> Iterator[Item]:
    """The items of an already-authorized session's conversation events after seq ``after`` (its newest
    summary's end), newest first: what this process kept of them, and the events after that from the
    database."""
    key = (version, after, model)
    with _kept_lock:
        kept = _kept.get(session_id)
        if kept is not None and kept.key != key:
            kept = None
    newest = [kept.last_seq if kept is not None else after]
    fresh = items_of(_events_read(selectors.conversation_events(session_id=session_id, after=newest[0]), newest), count)
    limit = budget * CACHE_BUDGETS
    read: list[Item] = []
    total = 0
    for item in fresh:
        read.append(item)
        total += item.tokens
        if total > limit:  # too long to keep: hand out what was read and the rest as it comes
            _drop(session_id)
            if kept is not None:  # read it all from the database, as if nothing had been kept
                return items_of(selectors.conversation_events(session_id=session_id, after=after), count)
            return _chain(read, fresh)
    if kept is not None and read and kept.items:
        last, first_kept = read[-1], kept.items[0]
        if last.status and first_kept.status and last.text == first_kept.text:
            read.pop()  # one status line announced again across the cut: the earliest stays, as in one read
    items = (*read, *kept.items) if kept is not None else tuple(read)
    if sum(item.tokens for item in items) <= limit:
        _keep(session_id, _Kept(key=key, last_seq=newest[0], items=items))
    else:
        _drop(session_id)
    return iter(items)


def _chain(first: list[Item], rest: Iterator[Item]) -> Iterator[Item]:
    yield from first
    yield from rest


def _keep(session_id: uuid.UUID, kept: _Kept) -> None:
    with _kept_lock:
        _kept[session_id] = kept
        _kept.move_to_end(session_id)
        while len(_kept) > settings.TESS_CONVERSATION_CACHE_SESSIONS:
            _kept.popitem(last=False)


def _drop(session_id: uuid.UUID) -> None:
    with _kept_lock:
        _kept.pop(session_id, None)


def conversation_kept_clear() -> None:
    """Forget every kept conversation of this process (tests that rewrite events behind the version's back)."""
    with _kept_lock:
        _kept.clear()
