"""The bounded load (``bench/load.py``) against the two-node cluster, then an exact reconciliation.

For ``TESS_LOAD_SECONDS`` (60 in ``make test-cluster``) turns, REST reads and websocket subscribers run on
both nodes; no error is allowed. Afterwards what was sent must match the database exactly: one idempotency
record per turn key (replays made none), each turn's ``turn.in`` and ``turn.out`` once in its session's
gap-free stream, one ``turn.decided`` audit row per turn, and every subscriber got every event of its
session exactly once, in order. The figures are printed with the test's result.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from django.contrib.auth.models import User

from bench.load import LoadConfig, LoadResult, load_seconds, run_load, stream_problems
from sessions_app.models import IdempotencyRecord, IdempotencyState, Session, SessionEvent
from tess_site.audit.models import AuditEvent

from .cluster import Cluster
from .test_cluster import _start_session

pytestmark = [pytest.mark.django_db(transaction=True)]

SESSIONS = 4


def _reconcile(result: LoadResult, owner: User) -> list[str]:
    problems: list[str] = []
    sent: dict[str, list[str]] = {}
    for turn in result.turns:
        sent.setdefault(turn.session_id, []).append(turn.turn_id)

    records = IdempotencyRecord.objects.filter(actor=owner, key__startswith=result.key_prefix)
    by_key = {r.key: r for r in records}
    if len(by_key) != len(result.turns) or records.count() != len(result.turns):
        problems.append(f"{records.count()} idempotency records for {len(result.turns)} turns")
    for turn in result.turns:
        record = by_key.get(turn.key)
        body = record.response_body if record is not None else None
        if record is None or record.state != IdempotencyState.DONE or (body or {}).get("turn_id") != turn.turn_id:
            problems.append(f"turn {turn.key}: no single finished idempotency record naming {turn.turn_id}")

    for session_id in result.config.sessions:
        events = list(SessionEvent.objects.filter(session_id=session_id).order_by("seq"))
        seqs = [e.seq for e in events]
        last = Session.objects.values_list("last_seq", flat=True).get(pk=session_id)
        if seqs != list(range(1, last + 1)):
            problems.append(f"session {session_id}: the stream is not gap-free 1..{last}")
        expected = Counter(sent.get(session_id, []))
        for kind in ("turn.in", "turn.out"):
            got = Counter(e.body["turn_id"] for e in events if e.kind == kind)
            if got != expected:
                problems.append(f"session {session_id}: {kind} events do not match the turns sent exactly once")
        order = {(e.kind, e.body.get("turn_id")): e.seq for e in events if e.kind in ("turn.in", "turn.out")}
        if any(order[("turn.in", t)] > order[("turn.out", t)] for t in expected if ("turn.in", t) in order):
            problems.append(f"session {session_id}: a turn.out precedes its turn.in")
        audited = Counter(
            row["turn_id"]
            for row in AuditEvent.objects.filter(action="turn.decided", target_id=session_id).values_list(
                "metadata", flat=True
            )
        )
        if audited != expected:
            problems.append(f"session {session_id}: turn.decided audit rows do not match the turns sent")
        if result.last_seq[session_id] != last:
            problems.append(f"session {session_id}: events were appended after the run ended")
    return problems + stream_problems(result)


def test_a_minute_of_mixed_load_on_two_nodes_has_no_error_and_reconciles_exactly(
    cluster: Cluster, cast, token_for, capsys
):
    token = token_for(cast.owner)
    nodes = list(cluster.nodes.values())
    sessions = [_start_session(nodes[i % 2], token, title=f"load {i}") for i in range(SESSIONS)]
    config = LoadConfig(nodes=[n.url for n in nodes], token=token, sessions=sessions, seconds=load_seconds())

    result = asyncio.run(run_load(config))

    with capsys.disabled():
        print("\n" + result.report())
    assert result.errors == [], result.errors[:20]
    assert result.turns and result.replays and all(s.seqs for s in result.subscriptions)
    assert _reconcile(result, cast.owner) == []
