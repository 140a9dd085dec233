"""Terminal output as plain text for a web page: escape sequences removed, carriage returns applied.

A runtime's output carries colours, cursor moves and OSC sequences (``ESC ] 52`` writes the clipboard). A
page that shows "the last lines" shows what a person would have read on the screen, never the sequences.
"""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-byte escapes, and their C1 forms.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[ -/]*[0-~]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x9d[^\x07\x9c]*[\x07\x9c]?"
)
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def plain_lines(text: str, *, last: int) -> list[str]:
    """The last ``last`` lines of ``text`` as a screen shows them, without any control character."""
    text = _ESCAPES.sub("", text.replace("\r\n", "\n"))
    lines = []
    for line in text.split("\n"):
        # A carriage return rewrites the line from its start (progress bars): what stays is the last write.
        line = line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r")
        lines.append(_CONTROLS.sub("", line.expandtabs(8)).rstrip())
    while lines and not lines[-1]:
        lines.pop()
    return lines[-last:] if last > 0 else []
