"""Ids as people type them: a full id, or any unique prefix of one.

A prefix is resolved through the API's own lists, so it matches only what the caller may see; a prefix that
fits several objects is refused with the candidates listed rather than guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .client import NOT_FOUND, USAGE, Api, CliError

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_SHOWN = 10


@dataclass(frozen=True)
class Kind:
    noun: str
    list_path: str
    label: str  # the field shown next to each candidate


SESSION = Kind("session", "/api/v1/sessions/", "title")
APPROVAL = Kind("approval", "/api/v1/approvals/", "action")
CARD = Kind("card", "/api/v1/cards/", "kind")
HANDOFF = Kind("hand-off", "/api/v1/handoffs/", "summary")


def resolve(api: Api, kind: Kind, ref: str) -> str:
    """The one id of ``kind`` visible to the caller that is ``ref`` or starts with it."""
    wanted = ref.strip().lower()
    if _UUID.match(wanted):
        return wanted
    if not wanted:
        raise CliError(f"Give a {kind.noun} id (or the first characters of one).", USAGE)
    data = api.get(kind.list_path)
    rows: list[dict[str, Any]] = list(data.get("results", [])) if isinstance(data, dict) else list(data)
    matches = [row for row in rows if str(row.get("id", "")).lower().startswith(wanted)]
    if len(matches) == 1:
        return str(matches[0]["id"])
    if not matches:
        raise CliError(f"No {kind.noun} you can see has an id starting with {ref!r}.", NOT_FOUND)
    listed = "\n".join(f"  {row['id']}  {row.get(kind.label) or ''}".rstrip() for row in matches[:_SHOWN])
    more = f"\n  … and {len(matches) - _SHOWN} more" if len(matches) > _SHOWN else ""
    raise CliError(
        f"{ref!r} is the start of {len(matches)} {kind.noun} ids; type more of the one you mean:\n{listed}{more}",
        USAGE,
    )
