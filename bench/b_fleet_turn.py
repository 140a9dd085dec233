"""A turn over real HTTP on the production tier, beside the same servers' cheapest answers.

The tier is ``bench/topology.py``'s: gunicorn (``tess-web.service``) and daphne (``tess-ws.service``) from
their units under the production settings, behind nginx (``deploy/nginx/tess.conf``), on this run's
PostgreSQL and Redis. One client on one keep-alive connection through nginx sends, interleaved so every kind
sees the same machine:

- ``GET /healthz``: no authentication, no database;
- the minimal authenticated one-row POST: ``POST /api/v1/inbox/push-subscriptions/`` with a personal token,
  one browser's Web Push subscription stored (the same row each time: the smallest idempotent API POST that
  writes exactly one row; DRF, token lookup, validation, one upsert, one count);
- a turn: ``POST /api/v1/sessions/<id>/turns/`` with an ``Idempotency-Key``, the deterministic adapter and
  8 operator-memory notes recalled.

Target: the turn's p95 at most 3x the minimal POST's. ``BENCH_FLEET_SAMPLES`` (200) per kind.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable

import httpx

from bench.common import Row, percentile
from bench.load import PUSH_PATH, push_subscription
from bench.topology import bench_operator, production_tier

SAMPLES = int(os.environ.get("BENCH_FLEET_SAMPLES", "200"))
NOTES = 8


def run() -> list[Row]:
    token, (session_id,) = bench_operator("fleet-turn", sessions=1, notes=NOTES)
    samples: dict[str, list[float]] = {"healthz": [], "push": [], "turn": []}
    with (
        production_tier("turn", TESS_MODEL_ADAPTER="deterministic") as tier,
        httpx.Client(
            base_url=tier.url, headers={"Authorization": f"Bearer {token}"}, timeout=60, trust_env=False
        ) as client,
    ):
        body = push_subscription(f"fleet-turn-{uuid.uuid4().hex[:8]}")

        def healthz() -> None:
            assert client.get("/healthz").status_code == 200

        def push() -> None:
            response = client.post(PUSH_PATH, json=body)
            assert response.status_code == 201, response.text

        def turn() -> None:
            response = client.post(
                f"/api/v1/sessions/{session_id}/turns/",
                json={"text": "what am I working on?"},
                headers={"Idempotency-Key": uuid.uuid4().hex},
            )
            assert response.status_code == 200, response.text
            assert response.json()["memory"]["recalled_count"] == NOTES

        calls: dict[str, Callable[[], None]] = {"healthz": healthz, "push": push, "turn": turn}
        for _ in range(20):  # warm-up: every worker's first requests, the pools' connections, prepared statements
            for call in calls.values():
                call()
        for _ in range(SAMPLES):
            for kind, call in calls.items():
                started = time.perf_counter()
                call()
                samples[kind].append((time.perf_counter() - started) * 1000)
    print(
        f"\nfleet turn: {SAMPLES} of each through nginx to gunicorn (production settings), p50/p95 ms: "
        + ", ".join(f"{k} {percentile(v, 0.5):.1f}/{percentile(v, 0.95):.1f}" for k, v in samples.items())
    )
    turn_name = f"fleet: turn ({NOTES} notes) over nginx"
    push_name = "POST push-subscription (one row)"
    return [
        Row(f"{turn_name} p50", "GET /healthz p50", percentile(samples["healthz"], 0.5),
            percentile(samples["turn"], 0.5), unit="ms"),
        Row(f"{turn_name} p95", "GET /healthz p95", percentile(samples["healthz"], 0.95),
            percentile(samples["turn"], 0.95), unit="ms"),
        Row(f"{turn_name} p50", f"{push_name} p50", percentile(samples["push"], 0.5),
            percentile(samples["turn"], 0.5), unit="ms"),
        Row(f"{turn_name} p95", f"{push_name} p95", percentile(samples["push"], 0.95),
            percentile(samples["turn"], 0.95), unit="ms", at_most=3.0),
    ]  # fmt: skip
