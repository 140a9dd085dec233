"""The workspace's reviewed project context in an answer (seed 003, "Retrieval Contract V1"): the turn's text as
the goal, the session's workspace key and the files the text names go to plast-mem's ``context_pre_retrieve``;
the bounded block comes back under the exact label ``PRE_RETRIEVE_LABEL`` and is placed in the dynamic section
below the live state, as data that ranks below every authority.

Conflicts are decided by ``PromptContext.resolve``: a retrieved line that gives a setting a value
(``PGTZ=UTC``) is left out when the operator's instruction in this turn or current-run evidence (this
session's hand-off results, its live state) gives the same setting a value; the block says which were left
out. A session without a workspace key gets no block and asks nothing. When plast-mem fails, the answer goes
on without the block and a system line says so. The call is made with no transaction open (step 2 of a turn).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from memory_app.coding.preretrieve import (
    Authority,
    PromptContext,
    coding_context_retrieve,
    evidence_items,
    retrieved_block,
    retrieved_lines,
)
from tess_site.scope import Scope

from . import selectors
from .models import Session
from .stream import EventKind

EVIDENCE_HANDOFFS = 20  # the newest hand-off results of the session that count as current-run evidence
# A path the operator names (``ledger/close.py``, ``src/app.ts``): a relevant file for the retrieval query.
_FILE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.[A-Za-z0-9]{1,8})(?![\w/])")


@dataclass(frozen=True)
class ProjectContext:
    block: str = ""  # the labelled block as it goes into the prompt; "" when there is none
    system_line: tuple[str, str] | None = None  # (code, text) when plast-mem could not be read


def files_named(text: str) -> list[str]:
    return list(dict.fromkeys(match.group(1) for match in _FILE.finditer(text) if "/" in match.group(1)))


def _handoff_results(session: Session) -> list[str]:
    rows = selectors.events_before(session_id=session.pk, before=None, limit=EVIDENCE_HANDOFFS, kind=EventKind.HANDOFF)
    results = []
    for row in rows:
        body = row.body if isinstance(row.body, dict) else {}
        if body.get("result"):
            results.append(str(body["result"]))
    return results


def project_context(scope: Scope, session: Session, *, text: str, live: dict[str, Any]) -> ProjectContext:
    """The workspace's reviewed project context for this turn, resolved against current-run authority."""
    if not session.workspace_key:
        return ProjectContext()
    retrieval = coding_context_retrieve(
        scope, goal=text, workspace_key=session.workspace_key, related_files=files_named(text)
    )
    if retrieval.unavailable:
        return ProjectContext(
            system_line=(
                "project_context_unavailable",
                f"The reviewed project context of {session.workspace_key} could not be read "
                f"({retrieval.unavailable}); this answer uses none.",
            )
        )
    if retrieval.item is None:
        return ProjectContext()
    context = PromptContext()
    for item in evidence_items(Authority.LIVE_INSTRUCTION, text):
        context.add(item)
    for result in _handoff_results(session):
        for item in evidence_items(Authority.CURRENT_RUN_EVIDENCE, result):
            context.add(item)
    for item in evidence_items(Authority.CURRENT_RUN_EVIDENCE, json.dumps(live, sort_keys=True, default=str)):
        context.add(item)
    for item in retrieved_lines(retrieval.item):
        context.add(item)
    return ProjectContext(block=retrieved_block(context))
