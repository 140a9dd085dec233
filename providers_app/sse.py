"""Server-sent events (``text/event-stream``, WHATWG HTML): the events in a stream's lines, for every client
here that reads one (Hermes's run events, a streamed chat completion)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Sse:
    event: str  # "" when the event named none
    data: str
    id: str = ""


def sse_events(lines: Iterable[str]) -> Iterator[Sse]:
    """``event:``, ``data:`` (its lines joined with LF) and ``id:``; a blank line dispatches an event that has
    data; a line starting with ``:`` is a comment; an event the stream ends before its blank line is dropped."""
    event, event_id = "", ""
    data: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r")
        if not line:
            if data:
                yield Sse(event=event, data="\n".join(data), id=event_id)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            event_id = value
