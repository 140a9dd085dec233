"""What lies outside the servers in ``bench/b_fleet_model.py``: the model and the operators sending turns.

In production the model is a provider's machine and the operators are on their own laptops; here both share the
servers' two cores. This process runs them at the lowest CPU priority (``nice 19``), so that they take only the
CPU the servers leave and the probes measure the servers, not the load generator: the chat-completions
stand-in (``tests/providers_app/chat_standin.py``, its ``slow`` model) and the closed-loop turn clients.

It is driven by JSON lines on stdin and answers with JSON lines on stdout:

- on start it prints ``{"standin": <base url>}``;
- ``{"turns": {"url", "token", "sessions", "count", "spread"}}`` starts ``count`` clients, each sending a turn
  as soon as its last one answered (client ``i`` starts after ``i / count`` of the model's time when
  ``spread``), and prints ``{"waiting": true}`` once every client has sent its first turn and it is waiting;
- ``{"stop": true}`` lets every client finish its turn in flight and prints ``{"turns": [ms, ...], "errors":
  [...]}``;
- end of input stops the stand-in and the process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from typing import Any

import httpx

from tests.providers_app.chat_standin import ChatStandIn


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def _client(
    url: str, token: str, session_id: str, stop: asyncio.Event, out: list[float], errors: list[str], delay: float
) -> None:
    await asyncio.sleep(delay)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, trust_env=False) as client:
        while not stop.is_set():
            started = time.perf_counter()
            response = await client.post(
                f"/api/v1/sessions/{session_id}/turns/",
                json={"text": "what am I working on?"},
                headers={"Idempotency-Key": uuid.uuid4().hex},
            )
            if response.status_code != 200:
                errors.append(f"turn: {response.status_code} {response.text[:200]}")
            out.append((time.perf_counter() - started) * 1000)


async def _serve(model_seconds: float) -> None:
    loop = asyncio.get_running_loop()
    stop, clients = asyncio.Event(), list[asyncio.Task[None]]()
    turns: list[float] = []
    errors: list[str] = []
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        command = json.loads(line)
        if "turns" in command:
            job = command["turns"]
            stop, turns, errors = asyncio.Event(), [], []
            count, sessions = int(job["count"]), job["sessions"]
            spread = model_seconds if job.get("spread", True) else 0.0
            url, token = job["url"], job["token"]
            clients = [
                asyncio.create_task(
                    _client(url, token, sessions[i % len(sessions)], stop, turns, errors, spread * i / count)
                )
                for i in range(count)
            ]
            await asyncio.sleep(spread + 0.5)  # every client has sent its first turn, which waits on the model
            _say({"waiting": True})
        elif command.get("stop"):
            stop.set()
            await asyncio.gather(*clients)
            _say({"turns": turns, "errors": errors})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-seconds", type=float, default=2.0)
    args = parser.parse_args()
    os.nice(19)
    standin = ChatStandIn(slow_seconds=args.model_seconds).start()
    _say({"standin": standin.base_url})
    try:
        asyncio.run(_serve(args.model_seconds))
    finally:
        standin.stop()


if __name__ == "__main__":
    main()
