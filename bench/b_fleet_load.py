"""A closed-loop load on two nodes behind one nginx: turns, reads and 50 websocket subscribers.

Two gunicorn + daphne pairs from the units (production settings), one nginx in front whose upstreams list
both (``bench/topology.py``), this run's PostgreSQL and Redis. ``bench/load.py`` runs 16 HTTP clients through
nginx, 8 senders and 8 REST readers (sessions list, events, memory), and 50 websocket subscribers (10 on each
of 5 sessions, from cursor 0, spread by nginx over both daphnes), for ``BENCH_LOAD_SECONDS`` (60), twice:

1. the senders send the minimal authenticated one-row POST (``POST /api/v1/inbox/push-subscriptions/``);
2. the senders send turns (deterministic adapter; every 10th sent again with its key, and must be replayed).

Targets: no error in either run (a non-2xx answer, a dropped socket, a replay handled again); turns per
second at least 0.4x the POSTs per second of the same load; and every event of the turn run delivered to
every subscriber exactly once, in order (each subscriber's seqs are 1..the session's last seq).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os

from bench.common import Row, as_elsewhere, percentile
from bench.load import LoadConfig, LoadResult, run_load, stream_problems
from bench.topology import bench_operator, production_tier

SECONDS = float(os.environ.get("BENCH_LOAD_SECONDS", "60"))
SESSIONS = 5
SUBSCRIBERS_PER_SESSION = 10


def _delivered_once(result: LoadResult) -> tuple[int, int]:
    """(events due to subscribers, events each subscriber got exactly once and in order)."""
    due = once = 0
    for sub in result.subscriptions:
        expected = list(range(1, result.last_seq[sub.session_id] + 1))
        due += len(expected)
        got = sub.seqs[: len(expected)]
        once += len(expected) if got == expected else sum(1 for a, b in zip(got, expected, strict=False) if a == b)
    return due, once


def run() -> list[Row]:
    token, sessions = bench_operator("fleet-load", sessions=SESSIONS)
    with production_tier("load", nodes=2, TESS_MODEL_ADAPTER="deterministic") as tier:
        config = LoadConfig(
            nodes=[tier.url],
            token=token,
            sessions=sessions,
            seconds=SECONDS,
            turn_senders=8,
            rest_readers=8,
            subscribers_per_session=SUBSCRIBERS_PER_SESSION,
            sends="push",
        )
        # Every worker's first requests, first-request imports and pooled connections, before measuring: the
        # turn servers' as well, which serve only turns (their warm-up turns are in the subscribers' backlog).
        warm = dataclasses.replace(config, seconds=min(3.0, SECONDS), subscribers_per_session=0)

        # The clients run at the lowest CPU priority (``as_elsewhere``): the 50 subscribers of the turn run parse
        # twenty times the events of the POST run's, CPU that would otherwise come out of the servers' share.
        def load(run: LoadConfig) -> LoadResult:
            return as_elsewhere(lambda: asyncio.run(run_load(run)))

        for sends in ("push", "turn"):
            load(dataclasses.replace(warm, sends=sends))
        posts = load(config)
        turns = load(dataclasses.replace(config, sends="turn"))
    problems = stream_problems(turns)
    for label, result in (("minimal POST", posts), ("turns", turns)):
        print(f"\nfleet load, 2 nodes behind nginx, senders send {label}:\n{result.report()}")
        for error in result.errors[:5]:
            print(f"  error: {error}")
    for problem in problems[:5]:
        print(f"  stream: {problem}")
    turn_latencies = turns.latencies.get("POST turn", [])
    post_latencies = posts.latencies.get("POST push-subscription", [])
    requests = sum(len(v) for r in (posts, turns) for v in r.latencies.values()) + len(posts.errors + turns.errors)
    due, once = _delivered_once(turns)
    return [
        Row("fleet load: turns/s (8 senders, 2 nodes)", "POST push-subscription/s, same load",
            len(post_latencies) / posts.elapsed, len(turn_latencies) / turns.elapsed, unit="/s", at_least=0.4),
        Row("fleet load: turn p95", "POST push-subscription p95, same load",
            percentile(post_latencies, 0.95) * 1000, percentile(turn_latencies, 0.95) * 1000, unit="ms"),
        Row("fleet load: errors, both runs", "requests made, both runs",
            requests, len(posts.errors) + len(turns.errors), unit="", at_most=0.0),
        Row("fleet load: events got once, in order", f"events due to {len(turns.subscriptions)} subscribers",
            due, once, unit="", at_least=1.0),
    ]  # fmt: skip
