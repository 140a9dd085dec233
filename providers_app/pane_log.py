"""Per-pane output logs read by byte offset: the exact cursor of the tmux stream.

tmux copies each pane's output (``pipe-pane``) into ``<session dir>/<pane id>.log``; when that copy ends
(the pane died, the pipe was closed) the writer leaves ``<pane id>.closed`` beside it. Reading needs no
tmux at all: a page is a ``stat`` and a ``read`` per pane with new bytes.

The cursor is the byte offset reached in every pane's log, written ``"%3:1024,%5:0"`` (panes in id order;
a pane missing from a cursor starts at 0; ``""`` is the beginning). It is opaque to clients. Reading from
a page's ``next_cursor`` — or from any chunk's ``next_cursor`` — continues exactly after the last byte
returned: nothing skipped, nothing twice. A chunk never ends inside a UTF-8 sequence: an incomplete
sequence at the end of what was written so far waits for its remaining bytes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tess_site.errors import InvalidInput

from .contract import OutputChunk

LOG_SUFFIX = ".log"
CLOSED_SUFFIX = ".closed"
_PANE = re.compile(r"%(\d{1,9})")


def pane_number(pane: str) -> int:
    match = _PANE.fullmatch(pane)
    return int(match.group(1)) if match else -1


def decode_cursor(cursor: str | None) -> dict[str, int]:
    if not cursor:
        return {}
    offsets: dict[str, int] = {}
    for part in cursor.split(","):
        pane, separator, offset = part.rpartition(":")
        if not separator or not _PANE.fullmatch(pane) or not offset.isdigit() or len(offset) > 18:
            raise InvalidInput("This is not a stream cursor of this session.", details={"field": "cursor"})
        offsets[pane] = int(offset)
    return offsets


def encode_cursor(offsets: Mapping[str, int]) -> str:
    return ",".join(f"{pane}:{offsets[pane]}" for pane in sorted(offsets, key=pane_number))


def sequence_length(lead: int) -> int:
    """Bytes of the UTF-8 sequence starting with ``lead`` (1 for ASCII and for bytes that cannot lead)."""
    if lead < 0xC0:
        return 1
    if lead < 0xE0:
        return 2
    if lead < 0xF0:
        return 3
    if lead < 0xF8:
        return 4
    return 1


def complete_prefix(data: bytes) -> int:
    """Length of the longest prefix of ``data`` that does not end inside a UTF-8 sequence."""
    end = len(data)
    start = end - 1
    while start >= 0 and end - start < 4 and data[start] & 0xC0 == 0x80:
        start -= 1
    if start < 0 or data[start] & 0xC0 == 0x80:
        return end  # only continuation bytes: not valid UTF-8 anyway, never worth waiting for
    return start if end - start < sequence_length(data[start]) else end


@dataclass(frozen=True)
class PaneLogPage:
    chunks: tuple[OutputChunk, ...]
    next_cursor: str
    drained: bool  # every log was read to the end it had when this page was read
    closed: bool  # every log's writer has finished: none of them will grow again


@dataclass
class _Pane:
    name: str
    offset: int
    size: int
    closed: bool

    @property
    def pending(self) -> int:
        return max(self.size - self.offset, 0)


def _scan(directory: Path, offsets: Mapping[str, int]) -> list[_Pane]:
    try:
        names = {entry.name for entry in os.scandir(directory)}
    except FileNotFoundError:
        names = set()
    panes = []
    for name in names:
        if not name.endswith(LOG_SUFFIX):
            continue
        pane = name[: -len(LOG_SUFFIX)]
        if pane_number(pane) < 0:
            continue
        # The closed marker is looked at before the size: once it exists, the size read after it is final.
        closed = f"{pane}{CLOSED_SUFFIX}" in names
        try:
            size = (directory / name).stat().st_size
        except FileNotFoundError:
            continue
        panes.append(_Pane(pane, offsets.get(pane, 0), size, closed))
    known = {pane.name for pane in panes}
    panes.extend(_Pane(pane, offset, 0, True) for pane, offset in offsets.items() if pane not in known)
    return sorted(panes, key=lambda pane: pane_number(pane.name))


def _allot(panes: list[_Pane], limit: int) -> list[int]:
    """Share ``limit`` bytes: an equal share each first, then what is left to whoever has more."""
    waiting = [pane for pane in panes if pane.pending]
    if not waiting:
        return [0] * len(panes)
    share = max(limit // len(waiting), 1)
    allotted = [min(share, pane.pending) for pane in panes]
    left = limit - sum(allotted)
    for index, pane in enumerate(panes):
        if left <= 0:
            break
        extra = min(left, pane.pending - allotted[index])
        allotted[index] += extra
        left -= extra
    return allotted


def _read(path: Path, offset: int, size: int, *, final: bool, truncated: bool) -> bytes:
    with path.open("rb") as log:
        log.seek(offset)
        data = log.read(size)
        if final and not truncated:
            return data  # the writer is done: a broken sequence at the very end will never complete
        cut = complete_prefix(data)
        if cut == 0 and data and truncated:
            # The allotment is smaller than one character: return that whole character, never a piece.
            need = sequence_length(data[0])
            log.seek(offset)
            whole = log.read(need)
            return whole if len(whole) == need or final else b""
        return data[:cut]


def read_logs(directory: Path, cursor: str | None, limit: int) -> PaneLogPage:
    """The output after ``cursor``: at most ``limit`` bytes (but at least one whole character of a pane)."""
    if limit < 1:
        raise InvalidInput("limit must be at least 1.", details={"field": "limit"})
    panes = _scan(directory, decode_cursor(cursor))
    offsets = {pane.name: pane.offset for pane in panes}
    chunks: list[OutputChunk] = []
    for pane, allotted in zip(panes, _allot(panes, limit), strict=True):
        if not allotted:
            continue
        truncated = allotted < pane.pending
        data = _read(
            directory / f"{pane.name}{LOG_SUFFIX}", pane.offset, allotted, final=pane.closed, truncated=truncated
        )
        if not data:
            continue
        before = encode_cursor(offsets)
        offsets[pane.name] = pane.offset + len(data)
        pane.offset += len(data)
        chunks.append(
            OutputChunk(
                data=data.decode("utf-8", errors="replace"),
                cursor=before,
                next_cursor=encode_cursor(offsets),
                source=pane.name,
            )
        )
    return PaneLogPage(
        chunks=tuple(chunks),
        next_cursor=encode_cursor(offsets),
        drained=all(pane.pending == 0 for pane in panes),
        closed=all(pane.closed for pane in panes),
    )
