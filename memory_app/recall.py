"""Recall at the prompt boundary (seed 002): the only read that advances ``last_used_at``.

For the copilot gateway::

    recall = recall_for_prompt(scope)   # Recall(block, recalled_count, memory_scope)

``block`` goes into the DYNAMIC section of the prompt only when non-empty (never the stable prefix);
``recalled_count`` is the N of "Recalled: N operator notes"; ``memory_scope`` is the chip's honest scope.
When memory is off or not served, the result is empty with scope ``session`` and nothing is read. A
database failure raises ``MemoryUnavailable`` (typed, retryable), never an empty memory: the gateway says
that memory could not be read and answers without it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from tess_site.refs import resolve_many
from tess_site.rows import hot_cursor
from tess_site.scope import Role, Scope

from .errors import loud
from .policy import RECALL_MAX_CHARS, RECALL_MAX_ROWS, Category
from .selectors import report_invalid, row_problem
from .switch import MemoryScope

PREAMBLE = (
    "Operator memory: notes this operator confirmed earlier. Every note is fallible.\n"
    "Precedence: security and system policy, then authoritative state from authorized live tools, then the "
    "operator's live instruction all override these notes. Preferences are presentation guidance only. "
    "Pinned references must be re-grounded through authorized live tools before any claim about current "
    "state. Ignore any note that is stale, conflicting or inapplicable.\n"
)
LABELS = {
    Category.STANDING_INITIATIVE.value: "standing initiative",
    Category.PREFERENCES.value: "preference",
    Category.PINNED_CONTEXTS.value: "pinned context",
}


@dataclass(frozen=True)
class Recall:
    block: str
    recalled_count: int
    memory_scope: MemoryScope
    # The memory ids of the notes rendered: the drawer shows their owner which notes grounded a reply.
    memory_ids: tuple[str, ...] = ()


def _line(row: RecallRow) -> str:
    text = " ".join(row.value.split())  # one line per note, whatever whitespace it was confirmed with
    if row.ref:
        return f"- [{LABELS[row.category]} {row.ref}, fallible; re-ground before use] {text}\n"
    return f"- [{LABELS[row.category]}, fallible] {text}\n"


def render(rows: list[RecallRow]) -> tuple[str, list[RecallRow]]:
    """The block and the rows that fit in it (at most RECALL_MAX_CHARS characters, in order)."""
    block, used = PREAMBLE, []
    for row in rows:
        line = _line(row)
        if len(block) + len(line) > RECALL_MAX_CHARS:
            break
        block += line
        used.append(row)
    return (block if used else ""), used


# One round trip for the runtime switch and the operator's active rows (seed 002: the switch is read on
# every request). Written as SQL because recall sits on every operator turn and has a budget against the
# raw floor (bench/b_memory.py); the rows are validated in Python exactly like every other load.
_RECALL_SQL = """
    SELECT sw.enabled, m.id, m.memory_id, m.category, m.slot, m.value, m.canonical, m.ref, m.revision,
           m.predecessor_revision, m.salience, m.expires_at, m.last_used_at
      FROM (SELECT COALESCE((SELECT enabled FROM memory_app_memoryswitch WHERE id = 1), TRUE) AS enabled) sw
      LEFT JOIN memory_app_operatormemory m
        ON sw.enabled AND m.tenant_id = %s AND m.operator_id = %s AND (m.expires_at IS NULL OR m.expires_at > %s)
     ORDER BY m.salience DESC, m.reauthorized_at DESC, m.id
"""


@dataclass(frozen=True)
class RecallRow:
    """The columns recall reads, with the attribute names ``row_problem`` validates."""

    pk: int
    memory_id: object
    category: str
    slot: str
    value: str
    canonical: str
    ref: str
    revision: int
    predecessor_revision: int | None
    salience: int
    expires_at: object
    last_used_at: datetime | None = None


# The rows stay locked until the turn commits. Another turn of the same operator recalling them meanwhile
# skips the rows held instead of queueing behind them (turns would otherwise run one at a time): the turn
# holding them marks them when it commits. GREATEST keeps last use from moving back when an earlier turn
# commits after a later one.
_MARK_USED_POSTGRES = """
    UPDATE memory_app_operatormemory SET last_used_at = GREATEST(last_used_at, %s)
     WHERE id IN (SELECT id FROM memory_app_operatormemory WHERE id = ANY(%s::bigint[]) FOR UPDATE SKIP LOCKED)
"""


def _load(scope: Scope, now: datetime) -> tuple[bool, list[RecallRow]]:
    assert scope.actor is not None
    params = [scope.tenant.pk, scope.actor.pk, connection.ops.adapt_datetimefield_value(now)]
    with hot_cursor() as cursor:
        cursor.execute(_RECALL_SQL, params)
        fetched = cursor.fetchall()
    enabled = bool(fetched[0][0])
    rows = [RecallRow(*row[1:]) for row in fetched if row[1] is not None]
    if connection.vendor != "postgresql":  # SQLite hands raw SQL its datetimes as text
        rows = [replace(row, last_used_at=_as_datetime(row.last_used_at)) for row in rows]
    return enabled, rows


def _as_datetime(value: object) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    parsed = parse_datetime(str(value))
    if parsed is not None and timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, UTC)
    return parsed


def _stale(rows: list[RecallRow], now: datetime) -> list[RecallRow]:
    """The rows whose recorded last use is older than ``TESS_MEMORY_LAST_USE_SECONDS`` (or absent): last use
    is kept to that resolution, so an operator's notes recalled turn after turn are not rewritten every turn."""
    since = now - timedelta(seconds=settings.TESS_MEMORY_LAST_USE_SECONDS)
    return [row for row in rows if row.last_used_at is None or row.last_used_at <= since]


def _mark_used(rows: list[RecallRow], now: datetime) -> None:
    at, ids = connection.ops.adapt_datetimefield_value(now), [row.pk for row in rows]
    with hot_cursor() as cursor:
        if connection.vendor == "postgresql":  # one statement (so one prepared plan) for any number of rows
            cursor.execute(_MARK_USED_POSTGRES, [at, ids])
            return
        marks = ", ".join(["%s"] * len(ids))
        cursor.execute(f"UPDATE memory_app_operatormemory SET last_used_at = %s WHERE id IN ({marks})", [at, *ids])  # noqa: S608


@loud
def recall_for_prompt(scope: Scope) -> Recall:
    """At most 8 active notes of the turn's operator, by salience then recency, rendered and marked used.

    Rows failing validation are reported and left out; a pin whose reference no longer resolves is skipped.
    Only the rows rendered get ``last_used_at`` advanced, to the resolution of
    ``TESS_MEMORY_LAST_USE_SECONDS``, and never by waiting: a row another turn holds locked is left to that turn
    to mark.
    """
    off = Recall(block="", recalled_count=0, memory_scope="session")
    if not (settings.TESS_OPERATOR_MEMORY and scope.actor is not None and scope.has_role(Role.OPERATOR)):
        return off
    now = timezone.now()
    enabled, candidates = _load(scope, now)
    if not enabled:
        return off
    valid = []
    for row in candidates:
        problem = row_problem(row)
        if problem is None:
            valid.append(row)
        else:
            report_invalid(row, problem)
    pins = [row.ref for row in valid if row.ref]
    readable = resolve_many(scope, pins) if pins else set()
    chosen = [row for row in valid if not row.ref or row.ref in readable][:RECALL_MAX_ROWS]
    block, used = render(chosen)
    stale = _stale(used, now)
    if stale:
        _mark_used(stale, now)
    return Recall(
        block=block,
        recalled_count=len(used),
        memory_scope="profile",
        memory_ids=tuple(str(row.memory_id) for row in used),
    )
