"""The deterministic intent classifier of the copilot turn (DESIGN.md, "The authority model").

It decides the authority class of a turn from the operator's own text, before any model runs; a model
may phrase an answer later but never changes the class. The rules, first match wins:

| operator text | class | what the gateway does |
| --- | --- | --- |
| ``remember …``, ``forget …``, ``correct …`` | ``memory`` | parks a memory card (the operator's words verbatim) |
| terminate / kill / end / shut down the session | ``approval`` | requests a one-time approval (``session.terminate``) |
| create branch/tag NAME in REPO [from REV] | ``approval`` | the catalog's ``gitops.create_*`` tool: an approval |
| delete, deploy, push, send keys, run commands, post to a channel … | ``unsupported`` | refused, typed, naming why |
| what did we decide about X?, find / look up X | ``retrieval`` | searches records; says what and where from |
| fix, implement, review, merge, refactor, decompose, assign … | ``handoff`` | a correlated Mos hand-off |
| diagnose, health, ping, capabilities | ``diagnostics`` | answered from provider health and capabilities |
| status, progress, what is running, output | ``status`` | answered from live provider state |
| anything else | ``conversation`` | answered within policy |
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from memory_app.policy import STANDING_SLOT, Category, derived_slot


class IntentClass(StrEnum):
    CONVERSATION = "conversation"
    STATUS = "status"
    DIAGNOSTICS = "diagnostics"
    RETRIEVAL = "retrieval"
    MEMORY = "memory"
    APPROVAL = "approval"
    HANDOFF = "handoff"
    UNSUPPORTED = "unsupported"


ANSWERED = (IntentClass.CONVERSATION, IntentClass.STATUS, IntentClass.DIAGNOSTICS, IntentClass.RETRIEVAL)


@dataclass(frozen=True)
class Intent:
    """The classifier's decision. ``memory`` is the proposal for ``memory_propose`` (values verbatim from
    the operator's text); ``reason`` is the refusal's stable code for ``unsupported``."""

    cls: IntentClass
    memory: dict[str, Any] = field(default_factory=dict)
    action: str = ""
    tool: dict[str, Any] = field(default_factory=dict)  # a catalog tool's input, for ``action`` as a tool id
    reason: str = ""
    explanation: str = ""
    query: str = ""  # what a retrieval turn searches for, in the operator's words


_POLITE = re.compile(r"^(?:(?:hey |hi )?tess[,:]?\s+|please\s+|can you\s+|could you\s+|would you\s+|kindly\s+)+", re.I)
_REF = re.compile(r"\b(?:session|approval|handoff|audit):[A-Za-z0-9_-]{1,64}\b")
_INITIATIVE = re.compile(
    r"^(?:that\s+)?(?:my\s+)?(?:standing\s+)?initiative\s*(?:is|:|=|to|to be)?\s*(?P<value>.+)$", re.I | re.S
)
_FORGET_ALL = re.compile(r"^(?:all|everything|all (?:of )?my notes|all notes)\s*[.!]?$", re.I)
_CORRECT_ARROW = re.compile(r"^(?:that\s+)?(?P<old>.+?)\s*(?:->|→|=>)\s*(?P<new>.+)$", re.S)

_TERMINATE = re.compile(
    r"\b(?:terminate|kill|end|stop|shut\s*down|close)\b(?:\s+(?:this|the|my|that))?\s+(?:tmux\s+|runtime\s+)?session\b"
    r"|^terminate\b",
    re.I,
)

# Requests nobody in Tess performs: the reason code says why, so the refusal is never a silent emulation.
_UNSUPPORTED: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"^(?:git\s+)?(?:push|deploy|release|rollback|roll back|tag)\b", re.I),
        "gitops_write_unsupported",
        "Tess does not push, deploy or release. Creating a branch or tag needs an approval: say "
        "“create branch NAME in REPO” or “create tag NAME in REPO”.",
    ),
    (
        re.compile(r"^(?:delete|drop|truncate|wipe|erase|destroy|rm)\b", re.I),
        "destructive_action_unsupported",
        "Tess offers no destructive action besides an approved session termination.",
    ),
    (
        re.compile(r"^(?:send keys|type|run|exec|execute|sudo|ssh)\b", re.I),
        "raw_input_not_a_turn",
        "Raw input goes to the runtime as a message with an interactive attachment, never through a turn.",
    ),
    (
        re.compile(r"^(?:post|publish|announce|email|e-mail|message the customer|tweet)\b", re.I),
        "external_post_unsupported",
        "Posting to an externally visible channel is not something Tess does from a turn.",
    ),
    (
        re.compile(r"^(?:grant|revoke|promote|make .+ (?:an? )?(?:admin|approver))\b", re.I),
        "privileged_change_unsupported",
        "Roles and grants are changed by a tenant admin in the admin, not by a turn.",
    ),
    (
        re.compile(r"^(?:restart|reboot|start)\b", re.I),
        "runtime_control_unsupported",
        "Restarting or starting runtimes from a turn is not supported; start sessions through the sessions API.",
    ),
)

# A turn may ask for a GitOps write: the catalog's tool, which runs only behind an approval.
_GITOPS_CREATE = re.compile(
    r"^(?:git\s+)?(?:create|make|cut)\s+(?:a\s+|the\s+)?(?:new\s+)?(?P<kind>branch|tag)\s+(?P<name>\S{1,200})"
    r"\s+(?:in|on|for)\s+(?:(?:the|repo|repository)\s+)*(?P<repo>[A-Za-z0-9][A-Za-z0-9._-]{0,63})"
    r"(?:\s+(?:from|at)\s+(?P<start>\S{1,200}))?\s*[.!]?$",
    re.I,
)

_HANDOFF = re.compile(
    r"^(?:fix|implement|review|merge|refactor|decompose|assign|rebase|write (?:a |the )?(?:tests?|code|patch)|"
    r"add (?:a |the )?(?:feature|test)|debug|port|upgrade|bump|triage|open (?:a |the )?(?:pr|pull request))\b",
    re.I,
)
# Retrieval (seed 001: Tess answers "retrieval" itself): a question about what was decided or is known, or an
# explicit search. The query is the operator's words after the verb.
_RETRIEVAL = (
    re.compile(
        r"^what\s+(?:did|have|had)\s+(?:we|i|you|they)\s+(?:decide|decided|agree|agreed|settle|settled|conclude|"
        r"concluded|say|said|note|noted|record|recorded|learn|learned|find|found)\s+(?:about|on|regarding|for|re:?)\s+"
        r"(?P<query>.+?)\s*\??$",
        re.I | re.S,
    ),
    re.compile(r"^what\s+do\s+(?:we|i|you)\s+know\s+about\s+(?P<query>.+?)\s*\??$", re.I | re.S),
    re.compile(
        r"^(?:find|search(?:\s+for)?|look\s+up|look\s+for|dig\s+up)\s+(?:me\s+)?(?P<query>.+?)\s*[.?!]?$", re.I | re.S
    ),
)
_DIAGNOSTICS = re.compile(r"\b(?:diagnos\w*|health\w*|ping|heartbeat|capabilit\w*|doctor)\b", re.I)
_STATUS = re.compile(
    r"\b(?:status|progress|state|what(?:'s| is) (?:running|happening|going on)|how(?:'s| is) (?:it|the session)|"
    r"alive|running|output|doing)\b",
    re.I,
)


def _body(text: str) -> str:
    return _POLITE.sub("", text.strip(), count=1).strip()


def _verb(body: str, verb: str) -> str | None:
    """The rest of ``body`` after a leading ``verb`` (and a following colon), or None."""
    match = re.match(rf"^{verb}\b[:,]?\s*(?P<rest>.*)$", body, re.I | re.S)
    return match.group("rest").strip() if match else None


def _remember(rest: str) -> dict[str, Any]:
    initiative = _INITIATIVE.match(rest)
    if initiative:
        return {"op": "remember", "category": Category.STANDING_INITIATIVE.value, "value": initiative.group("value")}
    ref = _REF.search(rest)
    if ref:
        return {"op": "remember", "category": Category.PINNED_CONTEXTS.value, "value": rest, "ref": ref.group(0)}
    value = re.sub(r"^that\s+", "", rest, flags=re.I)
    return {"op": "remember", "category": Category.PREFERENCES.value, "value": value}


def _forget(rest: str) -> dict[str, Any]:
    if _FORGET_ALL.match(rest):
        return {"op": "forget_all"}
    if re.match(r"^(?:my\s+)?(?:standing\s+)?initiative\s*[.!]?$", rest, re.I):
        return {"op": "forget", "category": Category.STANDING_INITIATIVE.value, "slot": STANDING_SLOT}
    ref = _REF.search(rest)
    if ref:
        slot = derived_slot(Category.PINNED_CONTEXTS, ref.group(0))
        return {"op": "forget", "category": Category.PINNED_CONTEXTS.value, "slot": slot}
    value = re.sub(r"^that\s+", "", rest, flags=re.I)
    # A preference's slot is a keyed digest of its content, so the same words find the same slot.
    return {"op": "forget", "category": Category.PREFERENCES.value, "slot": derived_slot(Category.PREFERENCES, value)}


def _correct(rest: str) -> dict[str, Any]:
    initiative = _INITIATIVE.match(rest)
    if initiative:
        return {"op": "correct", "category": Category.STANDING_INITIATIVE.value, "value": initiative.group("value")}
    arrow = _CORRECT_ARROW.match(rest)
    if arrow:
        old, new = arrow.group("old").strip(), arrow.group("new").strip()
        slot = derived_slot(Category.PREFERENCES, old)
        return {"op": "correct", "category": Category.PREFERENCES.value, "slot": slot, "value": new}
    return {}


def classify(text: str) -> Intent:
    """The authority class of one operator turn. Deterministic: the same text always gives the same class."""
    body = _body(text)
    for verb, shape in (("remember", _remember), ("forget", _forget), ("correct", _correct)):
        rest = _verb(body, verb)
        if rest is None:
            continue
        proposal = shape(rest) if rest else {}
        if not proposal:
            return Intent(
                IntentClass.UNSUPPORTED,
                reason="memory_request_unclear",
                explanation=f"Say what to {verb}: e.g. “{verb} that I lead with sev0”"
                + (" or “correct old note -> new note”." if verb == "correct" else "."),
            )
        return Intent(IntentClass.MEMORY, memory=proposal)
    if _TERMINATE.search(body):
        return Intent(IntentClass.APPROVAL, action="session.terminate")
    gitops = _GITOPS_CREATE.match(body)
    if gitops:
        kind = gitops.group("kind").lower()
        tool = {"repo": gitops.group("repo"), kind: gitops.group("name")}
        if gitops.group("start"):
            tool["from"] = gitops.group("start")
        return Intent(IntentClass.APPROVAL, action=f"gitops.create_{kind}", tool=tool)
    for pattern, reason, explanation in _UNSUPPORTED:
        if pattern.match(body):
            return Intent(IntentClass.UNSUPPORTED, reason=reason, explanation=explanation)
    for pattern in _RETRIEVAL:
        found = pattern.match(body)
        if found and found.group("query").strip():
            return Intent(IntentClass.RETRIEVAL, query=found.group("query").strip())
    if _HANDOFF.match(body):
        return Intent(IntentClass.HANDOFF)
    if _DIAGNOSTICS.search(body):
        return Intent(IntentClass.DIAGNOSTICS)
    if _STATUS.search(body):
        return Intent(IntentClass.STATUS)
    return Intent(IntentClass.CONVERSATION)
