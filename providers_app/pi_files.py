"""Reading pi coding-agent session files (JSONL, version 3) as replay sources.

The format, as documented by pi-mono (``packages/coding-agent/docs/session-format.md`` of
``@mariozechner/pi-coding-agent``): the first line is a ``session`` header (``version``, ``id``,
``timestamp``, ``cwd``, optional ``parentSession``) that is not part of the tree; every later line is an
entry with ``type``, ``id`` (8 hexadecimal characters), ``parentId`` (null for the first) and an ISO
``timestamp``. Entry types: ``message`` (an AgentMessage: user, assistant, toolResult, bashExecution,
custom, ...), ``model_change``, ``thinking_level_change``, ``compaction`` (``summary``,
``firstKeptEntryId``, ``tokensBefore``), ``branch_summary``, ``custom``, ``custom_message``, ``label``
(``targetId``, ``label``) and ``session_info`` (``name``). Branching appends a child to an earlier entry;
the current leaf is the last entry appended.

pi appends to a file, and rewrites it whole only when it migrates an older version on load (or repairs
an empty one): then every byte offset may move. So a stream cursor is ``"<byte offset of an entry's
line>.<bytes of that entry's rendered text already returned>.<id of the line before it>"``: it names an
entry, a point inside its text, and what came just before, so a cursor the file was rewritten under is
recognised (``CursorLost``) instead of being read on from the wrong place, and ``resume_cursor`` finds the
same point again by ids, starting from the session's checkpoint. Cursors without the third part (written
before it existed) are still read, unchecked. Only lines ended by LF are read, so a line pi is still
writing is never half-read. What a file says is a replay of one agent's session, never truth about other
agents.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from tess_site.errors import InvalidInput

from .contract import CursorLost, OutputChunk, RuntimeNode, message_line

logger = logging.getLogger(__name__)

HEADER_MAX_BYTES = 65536
MIN_VERSION = 2  # version 2 introduced id/parentId; pi migrates 2 to 3 on load, both are trees
TITLE_CHARS = 80
_CURSOR = re.compile(r"(\d{1,15})\.(\d{1,12})")
_ENTRY_CURSOR = re.compile(r"(\d{1,15})\.(\d{1,12})(?:\.([0-9A-Za-z_-]{1,64}))?")
_ANCHOR = re.compile(r"[0-9A-Za-z_-]{1,64}")
LINE_BEFORE_MAX_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Header:
    id: str
    version: int
    timestamp: str
    cwd: str


@dataclass
class Summary:
    """What listing needs from a file, built incrementally as the file grows."""

    header: Header
    scanned: int = 0  # bytes of the file read so far (always at a line start)
    name: str = ""  # the latest session_info name
    first_prompt: str = ""
    entries: int = 0
    size: int = 0
    mtime: float = 0.0
    last_role: str = ""  # the role of the latest message entry ("" before the first)
    last_stop: str = ""  # its ``stopReason`` (assistant messages: stop, length, toolUse, error, aborted)


@dataclass
class Tree:
    entries: list[dict[str, Any]] = field(default_factory=list)


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def read_header(path: Path) -> Header | None:
    """The file's header, or None when it is not a pi session file of version 2 or later."""
    try:
        with path.open("rb") as handle:
            line = handle.readline(HEADER_MAX_BYTES)
    except OSError:
        return None
    if not line.endswith(b"\n"):
        return None
    try:
        header = json.loads(line)
    except ValueError:
        return None
    if not isinstance(header, dict) or header.get("type") != "session":
        return None
    version, session_id = header.get("version", 1), header.get("id")
    if not isinstance(version, int) or version < MIN_VERSION or not isinstance(session_id, str) or not session_id:
        return None
    return Header(
        id=session_id, version=version, timestamp=str(header.get("timestamp", "")), cwd=str(header.get("cwd", ""))
    )


def iter_lines(handle: BinaryIO, offset: int) -> Iterator[tuple[int, int, dict[str, Any] | None]]:
    """``(offset, next_offset, entry)`` for every complete line from ``offset``; entry None if unreadable."""
    handle.seek(offset)
    while True:
        line = handle.readline()
        if not line.endswith(b"\n"):
            return  # end of file, or a line still being written
        next_offset = offset + len(line)
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        yield offset, next_offset, entry if isinstance(entry, dict) else None
        offset = next_offset


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block.get("text", "")
            for block in content
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        )
    return ""


def render(entry: dict[str, Any]) -> str:
    """The output text an entry contributes to the stream: message text as written, ending its line.

    Each entry is a message of its own, so one that does not end with a line break gets one: the next entry
    starts on a new line instead of running on after it. Thinking, tool calls, images and bookkeeping entries
    contribute nothing; a custom message only when pi shows it (``display``).
    """
    return message_line(_rendered_text(entry))


def _rendered_text(entry: dict[str, Any]) -> str:
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            return ""
        role = message.get("role")
        if role in ("user", "assistant", "toolResult"):
            return _text_of(message.get("content"))
        if role == "bashExecution":
            return str(message.get("output") or "")
        if role == "custom" and message.get("display"):
            return _text_of(message.get("content"))
        return ""
    if kind == "custom_message" and entry.get("display"):
        return _text_of(entry.get("content"))
    return ""


def checkpoint_of(entry: dict[str, Any]) -> dict[str, Any] | None:
    if entry.get("type") != "compaction":
        return None
    tokens = entry.get("tokensBefore")
    return {
        "kind": "compaction",
        "entry_id": str(entry.get("id", "")),
        "summary": str(entry.get("summary", "")),
        "first_kept_entry_id": str(entry.get("firstKeptEntryId", "")),
        "tokens_before": tokens if isinstance(tokens, int) else None,
    }


def usage_of(entry: dict[str, Any]) -> dict[str, Any] | None:
    """An assistant message's ``usage`` (pi-ai's ``Usage``: tokens, and the cost pi priced them at in US
    dollars from its model registry). A cost of 0 for tokens that were spent means pi had no price for the
    model: not reported, so the ledger prices it from its own table or calls it unpriced."""
    message = entry.get("message") if entry.get("type") == "message" else None
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return None
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None

    def tokens(name: str) -> int:
        value = usage.get(name)
        return value if isinstance(value, int) and value >= 0 else 0

    counts = {"input": tokens("input"), "output": tokens("output")}
    counts |= {"cache_read": tokens("cacheRead"), "cache_write": tokens("cacheWrite")}
    cost = usage.get("cost")
    total = cost.get("total") if isinstance(cost, dict) else None
    spent = any(counts.values())
    reported = isinstance(total, (int, float)) and total >= 0 and (total > 0 or not spent)
    return {
        "ref": f"pi:{entry.get('id', '')}",
        "model": str(message.get("model") or "")[:128],
        **counts,
        "cost": str(total) if reported else None,
        "currency": "USD",
        "at": str(entry.get("timestamp") or ""),
    }


def refresh_summary(path: Path, summary: Summary) -> Summary:
    """Read only what was appended since the last call (files are append-only)."""
    stat = path.stat()
    if stat.st_size < summary.scanned:  # rewritten: start over
        summary = Summary(header=summary.header)
    if stat.st_size != summary.scanned:
        with path.open("rb") as handle:
            for _, next_offset, entry in iter_lines(handle, summary.scanned):
                summary.scanned = next_offset
                if entry is None or entry.get("type") == "session":
                    continue
                summary.entries += 1
                message = entry.get("message") if entry.get("type") == "message" else None
                if isinstance(message, dict) and isinstance(message.get("role"), str):
                    summary.last_role, summary.last_stop = message["role"], str(message.get("stopReason") or "")
                if entry.get("type") == "session_info" and isinstance(entry.get("name"), str):
                    summary.name = entry["name"]
                elif not summary.first_prompt and entry.get("type") == "message":
                    message = entry.get("message")
                    if isinstance(message, dict) and message.get("role") == "user":
                        summary.first_prompt = " ".join(render(entry).split())[:TITLE_CHARS]
    summary.size, summary.mtime = stat.st_size, stat.st_mtime
    return summary


def parse_cursor(cursor: str | None) -> tuple[int, int]:
    """``"<index>.<position>"`` (Hermes uses the same shape for its own cursors)."""
    if cursor is None or cursor == "":
        return 0, 0
    match = _CURSOR.fullmatch(cursor)
    if not match:
        raise InvalidInput("Malformed stream cursor.", details={"cursor": "expected '<offset>.<position>'"})
    return int(match.group(1)), int(match.group(2))


def parse_entry_cursor(cursor: str | None) -> tuple[int, int, str | None]:
    """``(offset, position, anchor)``; the anchor (the id of the line before ``offset``) is None when the
    cursor has none (the start of a file, or a cursor from before anchors)."""
    if cursor is None or cursor == "":
        return 0, 0, None
    match = _ENTRY_CURSOR.fullmatch(cursor)
    if not match:
        raise InvalidInput("Malformed stream cursor.", details={"cursor": "expected '<offset>.<position>[.<id>]'"})
    return int(match.group(1)), int(match.group(2)), match.group(3)


def format_cursor(offset: int, within: int, anchor: str | None) -> str:
    return f"{offset}.{within}.{anchor}" if anchor else f"{offset}.{within}"


def _anchor_of(entry: dict[str, Any] | None) -> str | None:
    """The id a line is known by (an entry's ``id``, the header's session id), if it has a usable one."""
    value = entry.get("id") if entry is not None else None
    return value if isinstance(value, str) and _ANCHOR.fullmatch(value) else None


def _at_line_start(handle: BinaryIO, offset: int, size: int) -> bool:
    if offset == 0:
        return True
    if offset > size:
        return False
    handle.seek(offset - 1)
    return handle.read(1) == b"\n"


def _line_before(handle: BinaryIO, offset: int) -> dict[str, Any] | None:
    """The line that ends at ``offset`` (a line start), parsed; None if unreadable or absurdly long."""
    if offset <= 0:
        return None
    start = offset - 1  # the LF that ends it
    block = 65536
    while start > 0 and offset - start <= LINE_BEFORE_MAX_BYTES:
        begin = max(0, start - block)
        handle.seek(begin)
        found = handle.read(start - begin).rfind(b"\n")
        if found >= 0:
            start = begin + found + 1
            break
        start = begin
    if offset - start > LINE_BEFORE_MAX_BYTES:
        return None
    handle.seek(start)
    try:
        entry = json.loads(handle.read(offset - start))
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


def utf8_prefix(data: bytes, budget: int) -> int:
    """The longest prefix of ``data`` within ``budget`` bytes that ends on a character boundary (at least
    one character, so a page always moves on)."""
    if len(data) <= budget:
        return len(data)
    end = budget
    while end > 0 and (data[end] & 0xC0) == 0x80:
        end -= 1
    if end == 0:  # one character is wider than the budget: take it whole
        end = 1
        while end < len(data) and (data[end] & 0xC0) == 0x80:
            end += 1
    return end


def read_page(path: Path, cursor: str | None, limit: int, max_entries: int = 5000) -> tuple[list[OutputChunk], str]:
    """Chunks after ``cursor`` (at most ``limit`` bytes of text) and the cursor to continue from."""
    offset, within, anchor = parse_entry_cursor(cursor)
    chunks: list[OutputChunk] = []
    budget = max(limit, 1)
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if not _at_line_start(handle, offset, size):
            raise CursorLost(details={"cursor": "not at an entry of the file"})
        before = _anchor_of(_line_before(handle, offset))
        if anchor is not None and before != anchor:
            raise CursorLost(details={"cursor": "the file changed before it"})
        position = format_cursor(offset, within, before)
        for count, (start, next_offset, entry) in enumerate(iter_lines(handle, offset)):
            if count >= max_entries or budget <= 0:
                break
            text = render(entry).encode() if entry is not None else b""
            if within > len(text):
                raise CursorLost(details={"cursor": "past the entry's text"})
            source = str(entry.get("id", "")) if entry is not None else ""
            first = entry is not None and within == 0
            checkpoint = checkpoint_of(entry) if first and entry is not None else None
            usage = usage_of(entry) if first and entry is not None else None
            rest = text[within:]
            taken = utf8_prefix(rest, budget) if rest else 0
            done = within + taken >= len(text)
            own = _anchor_of(entry)
            after = format_cursor(next_offset, 0, own) if done else format_cursor(start, within + taken, before)
            if taken or checkpoint is not None or usage is not None:
                chunks.append(
                    OutputChunk(
                        data=rest[:taken].decode(errors="replace"),
                        cursor=format_cursor(start, within, before),
                        next_cursor=after,
                        source=source,
                        checkpoint=checkpoint,
                        usage=usage,
                    )
                )
                budget -= taken
            position, within = after, 0 if done else within + taken
            if not done:
                break
            before = own
        return chunks, position


def resume_cursor(path: Path, cursor: str, checkpoint: dict[str, Any]) -> str:
    """The cursor of the point ``cursor`` named before the file was rewritten, found from the checkpoint:
    the checkpoint's entry by its id, then, after it, the entry the cursor's anchor names (the cursor points
    just past it, at the same position inside the next entry's text). A cursor whose anchor is not found
    after the checkpoint (or that has none) resumes just past the checkpoint's entry, which Tess recorded
    already. ``CursorLost`` when the checkpoint's entry is gone too."""
    _, within, anchor = parse_entry_cursor(cursor)
    wanted = str(checkpoint.get("entry_id") or "")
    resumed: str | None = None
    with path.open("rb") as handle:
        for _, next_offset, entry in iter_lines(handle, 0):
            own = _anchor_of(entry)
            if resumed is None:
                if own is not None and own == wanted:
                    resumed = format_cursor(next_offset, 0, own)
                    if anchor == own:
                        resumed = format_cursor(next_offset, within, own)
            elif anchor is not None and own == anchor:
                resumed = format_cursor(next_offset, within, own)
    if resumed is None:
        raise CursorLost(details={"cursor": "the checkpoint's entry is gone from the file"})
    return resumed


def read_entries(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as handle:
        return [
            entry
            for _, _, entry in iter_lines(handle, 0)
            if entry is not None and entry.get("type") != "session" and isinstance(entry.get("id"), str)
        ]


def build_tree(session_id: str, title: str, entries: list[dict[str, Any]]) -> RuntimeNode:
    """Session → entries by ``parentId``, branches as siblings; the path to the last entry is active.

    Built from the last entry back (a child always follows its parent in the file), so a long
    conversation needs no recursion. An entry whose parent is missing hangs off the session.
    """
    ids = {entry["id"] for entry in entries}
    leaf = entries[-1]["id"] if entries else None
    parent_of = {entry["id"]: entry.get("parentId") for entry in entries}
    active: set[str] = set()
    node_id = leaf
    while node_id is not None and node_id not in active:
        active.add(node_id)
        node_id = parent_of.get(node_id)
    labels = {
        entry.get("targetId"): entry.get("label")
        for entry in entries
        if entry.get("type") == "label" and isinstance(entry.get("targetId"), str)
    }
    children: dict[str | None, list[RuntimeNode]] = {}
    for entry in reversed(entries):
        entry_id = entry["id"]
        label = labels.get(entry_id)
        text = " ".join(render(entry).split())[:TITLE_CHARS]
        node = RuntimeNode(
            id=entry_id,
            kind=str(entry.get("type", "entry")),
            title=label if isinstance(label, str) and label else text,
            children=tuple(reversed(children.pop(entry_id, []))),
            active=entry_id in active,
        )
        parent = entry.get("parentId")
        children.setdefault(parent if parent in ids else None, []).append(node)
    roots = tuple(reversed(children.get(None, [])))
    return RuntimeNode(id=session_id, kind="session", title=title, children=roots, active=True)
