"""Tables for people, JSON for scripts.

Text from the server (titles, turns, other participants' words, runtime output) may carry terminal control
sequences: ``ESC ] 52`` writes the clipboard, ``ESC [ 2J`` clears the screen. What is printed for people shows
those characters in caret notation instead of obeying them; JSON escapes them by its own rules, and
``tess stream --raw`` writes runtime output as the runtime produced it.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

# C0 controls but tab and newline, DEL, and the C1 controls (0x9b is a one-byte CSI on some terminals).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"\\x{code:02x}"


def neutralise(text: str) -> str:
    """``text`` with every control character a terminal would act on made visible (``ESC`` reads ``^[``)."""
    return _CONTROL.sub(_visible, text.replace("\r\n", "\n"))


class NeutralisingWriter(io.TextIOBase):
    """A text stream that neutralises what it is given before passing it to ``underlying``."""

    def __init__(self, underlying: TextIO) -> None:
        self.underlying = underlying

    def write(self, text: str) -> int:
        self.underlying.write(neutralise(text))
        return len(text)

    def flush(self) -> None:
        self.underlying.flush()

    def isatty(self) -> bool:
        return self.underlying.isatty()


@contextmanager
def neutralised_output() -> Iterator[None]:
    """Neutralise everything printed to stdout and stderr while the block runs."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = NeutralisingWriter(saved[0]), NeutralisingWriter(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def write_raw(text: str) -> None:
    """Write ``text`` to the real standard output, control sequences included (``--raw``)."""
    out = sys.stdout.underlying if isinstance(sys.stdout, NeutralisingWriter) else sys.stdout
    out.write(text)
    out.flush()


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def _cell(value: Any, width: int = 60) -> str:
    text = "" if value is None else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str], empty: str = "(none)") -> None:
    if not rows:
        print(empty)
        return
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def plural(n: int, one: str, many: str) -> str:
    """``one`` or ``many`` by ``n`` (``{n}`` is replaced), so no line reads "1 notes" or "note(s)"."""
    return (one if n == 1 else many).format(n=n)


def indented(text: str, indent: int) -> str:
    """``text`` with every line after the first indented by ``indent`` spaces, so a multi-line value stays
    in its column instead of running back to the left margin."""
    return text.replace("\n", "\n" + " " * indent)


def fields(data: dict[str, Any], keys: Sequence[str]) -> None:
    width = max(len(k) for k in keys)
    for key in keys:
        value = data.get(key)
        text = "" if value is None else str(value).rstrip("\n")
        print(f"{key.ljust(width)}  {indented(text, width + 2)}")


def event_line(frame: dict[str, Any]) -> str:
    body = frame.get("body") or {}
    kind = frame.get("kind", "")
    if kind == "output":
        text = str(body.get("data", "")).rstrip("\n")
    elif kind == "redacted" and isinstance(body, dict):
        seqs = ", ".join(f"#{seq}" for seq in body.get("seqs") or [])
        text = f"{seqs} now read {body.get('text', '')}"
    elif kind == "status" and isinstance(body, dict) and "status" in body:
        state = body.get("agent_state")
        text = str(body["status"]) + (f", agent {str(state).replace('_', ' ')}" if state else "")
    elif isinstance(body, dict) and "text" in body:
        who = f"[{body['channel']}] " if body.get("channel") else ""
        text = f"{who}{body['text']}"
    else:
        text = json.dumps(body, sort_keys=True)
    return f"{frame.get('seq'):>6} {kind:<12} {indented(text, EVENT_INDENT)}"


EVENT_INDENT = 6 + 1 + 12 + 1  # the seq and kind columns of event_line
