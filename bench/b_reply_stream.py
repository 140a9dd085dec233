"""How soon a reply's first words reach a websocket subscriber after the model wrote them.

The production tier (``bench/topology.py``: gunicorn and daphne from their units, nginx in front) runs the
``openai_compatible`` adapter against the local chat-completions stand-in (``tests/providers_app/
chat_standin.py``, its ``drip`` model, which notes the wall-clock time it writes each answer's first piece).
A subscriber holds the session's websocket through nginx while ``BENCH_REPLY_TURNS`` (50) turns are sent one
after the other over HTTP; for each, measured: from the stand-in writing its first piece to the subscriber
receiving the first ``turn.delta`` with text (the turn's thread reading the stream, the delta's channel-layer
message through Redis, daphne, nginx). Beside it, in the same run, the stand-in's own first-token time asked
directly (a streamed request to it, to its first piece), as many times.

Target: at most 100 ms added at p95 (the row's ratio is against the direct first-token p95, its target the
ratio that 100 ms more would make).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid

import httpx
from websockets.asyncio.client import connect

from bench.common import Row, percentile
from bench.topology import bench_operator, production_tier
from tests.providers_app.chat_standin import ChatStandIn

TURNS = int(os.environ.get("BENCH_REPLY_TURNS", "50"))
ADDED_AT_MOST_MS = 100.0


async def _direct(standin: ChatStandIn, turns: int) -> list[float]:
    """The stand-in's first-token time asked directly (ms): a streamed request, to its first piece."""
    found: list[float] = []
    body = {"model": "drip", "stream": True, "messages": [{"role": "user", "content": "how is the fleet?"}]}
    async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
        for _ in range(turns):
            started = time.perf_counter()
            async with client.stream("POST", f"{standin.base_url}/chat/completions", json=body) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: {"):
                        found.append((time.perf_counter() - started) * 1000)
                        break
    return found


async def _through_tess(url: str, token: str, session_id: str, standin: ChatStandIn, turns: int) -> list[float]:
    """Per turn (ms): the stand-in's first piece written to the subscriber's first delta with text."""
    added: list[float] = []
    ws_url = url.replace("http://", "ws://") + f"/ws/sessions/{session_id}/stream/?cursor=0"
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        connect(ws_url, additional_headers=headers, open_timeout=30) as ws,
        httpx.AsyncClient(base_url=url, headers=headers, timeout=60, trust_env=False) as client,
    ):
        for n in range(turns + 2):  # two warm-up turns: each worker's first imports the model client
            written = len(standin.first_tokens)
            sent = asyncio.create_task(
                client.post(
                    f"/api/v1/sessions/{session_id}/turns/",
                    json={"text": f"how is the fleet doing, turn {n}?"},
                    headers={"Idempotency-Key": uuid.uuid4().hex},
                )
            )
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), timeout=60))
                if frame["kind"] == "turn.delta" and frame["body"]["text"]:
                    received = time.time()
                    break
            response = await sent
            if response.status_code != 200:
                raise RuntimeError(f"turn {n}: {response.status_code} {response.text[:200]}")
            if n >= 2:
                added.append((received - standin.first_tokens[written]) * 1000)
            # The turn's own turn.out arrives before the next turn starts, so no frame is taken for the next.
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), timeout=60))
                if frame["kind"] == "turn.out":
                    break
    return added


def run() -> list[Row]:
    token, (session_id,) = bench_operator("reply-stream", sessions=1)
    standin = ChatStandIn(drip_seconds=0.02).start()
    model = {"TESS_MODEL_ADAPTER": "openai_compatible", "TESS_MODEL_BASE_URL": standin.base_url, "TESS_MODEL": "drip"}
    try:
        with production_tier("reply-stream", **model) as tier:
            added = asyncio.run(_through_tess(tier.url, token, session_id, standin, TURNS))
            direct = asyncio.run(_direct(standin, TURNS))
    finally:
        standin.stop()
    base95, added50, added95 = percentile(direct, 0.95), percentile(added, 0.5), percentile(added, 0.95)
    verdict = "PASS" if added95 <= ADDED_AT_MOST_MS else "MISS"
    print(
        f"\nreply stream: {len(added)} turns; the stand-in's first token asked directly p50"
        f" {percentile(direct, 0.5):.1f} ms p95 {base95:.1f} ms; its first token to the subscriber's first delta"
        f" p50 {added50:.1f} ms p95 {added95:.1f} ms (target at most +{ADDED_AT_MOST_MS:.0f} ms at p95: {verdict})"
    )
    return [
        Row("reply stream: 1st token -> ws delta p50", "stand-in 1st token, asked directly p50",
            percentile(direct, 0.5), added50, unit="ms"),
        Row("reply stream: 1st token -> ws delta p95", "stand-in 1st token, asked directly p95",
            base95, added95, unit="ms", at_most=(ADDED_AT_MOST_MS / base95) if base95 else None),
    ]  # fmt: skip
