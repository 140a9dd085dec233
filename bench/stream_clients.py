"""Websocket subscribers for the stream benchmark, run in their own processes (no Django here).

Each process opens ``n`` subscriptions to one URL and records, per subscriber, every seq received and a
sample of latencies (receipt time minus the producer's timestamp carried in the frame).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from websockets.asyncio.client import connect

SAMPLE_EVERY = 5


async def _subscriber(
    url: str, headers: dict[str, str], ready: Any, done: Any, final: Any, out: dict[str, Any]
) -> None:
    seqs: list[int] = []
    latencies: list[float] = []
    async with connect(url, additional_headers=headers, proxy=None, open_timeout=30, max_queue=None) as ws:
        ready()
        deadline = None
        while True:
            if done.is_set() and deadline is None:
                deadline = time.monotonic() + 15  # grace: let stragglers arrive, then count what is missing
            if deadline is not None and (time.monotonic() > deadline or (seqs and seqs[-1] >= final.value)):
                break
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=0.5)
            except TimeoutError:
                continue
            now = time.time()
            frame = json.loads(raw)
            if frame.get("seq") is None:
                continue  # heartbeats
            seqs.append(frame["seq"])
            if frame["seq"] % SAMPLE_EVERY == 0:
                latencies.append(now - float(frame["body"]["text"]))
            out.setdefault("last_receipt", now)
            out["last_receipt"] = now
    out["seqs"] = seqs
    out["latencies"] = latencies


async def _main(url: str, headers: dict[str, str], n: int, ready_count: Any, done: Any, final: Any) -> list[dict]:
    outs: list[dict[str, Any]] = [{} for _ in range(n)]

    def ready() -> None:
        with ready_count.get_lock():
            ready_count.value += 1

    await asyncio.gather(*(_subscriber(url, headers, ready, done, final, out) for out in outs))
    return outs


def run_clients(
    url: str, headers: dict[str, str], n: int, ready_count: Any, done: Any, final: Any, results: Any
) -> None:
    outs = asyncio.run(_main(url, headers, n, ready_count, done, final))
    results.put(
        [
            {"seqs": o.get("seqs", []), "latencies": o.get("latencies", []), "last": o.get("last_receipt", 0.0)}
            for o in outs
        ]
    )
