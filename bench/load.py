"""A bounded load against a running Tess cluster: mixed REST calls, turns and websocket subscribers.

For ``TESS_LOAD_SECONDS`` (default 60) it runs, on every node given, at once:

- turn senders: ``POST /api/v1/sessions/{id}/turns/``, each with a fresh ``Idempotency-Key``; every
  ``replay_every``-th turn is sent a second time with the same key and body and must be replayed
  (``Idempotency-Replayed: true``, the same ``turn_id``), never handled twice;
- REST readers: ``GET /api/v1/sessions/``, ``GET .../events/`` and ``GET /api/v1/memory/``;
- websocket subscribers on ``/ws/sessions/{id}/stream/?cursor=0``, spread over the nodes, which must
  stay connected and end up with every event of their session exactly once, in order.

Any error (a non-2xx answer, a dropped socket, a replay that is not one) is counted; the run prints the
throughput and p95 latency per kind. It uses only HTTP and websockets, so it runs against any deployment:

    python -m bench.load --node http://127.0.0.1:8001 --node http://127.0.0.1:8002 \\
        --token "$TESS_TOKEN" --session <id> --session <id>

``make test-cluster`` runs it for 60 seconds against its own two-node cluster and then reconciles what was
sent exactly with the database (``tests_cluster/test_load.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import json
import os
import random
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.asyncio.client import connect

from bench.common import percentile

DEFAULT_SECONDS = 60.0
CATCH_UP_SECONDS = 60.0  # after the senders stop, how long subscribers get to reach the last event
PUSH_PATH = "/api/v1/inbox/push-subscriptions/"


@dataclass(frozen=True)
class LoadConfig:
    nodes: list[str]  # base URLs, e.g. http://127.0.0.1:8001
    token: str  # a personal access token of an operator who owns (or may operate) every session
    sessions: list[str]
    seconds: float = DEFAULT_SECONDS
    turn_senders: int = 4
    rest_readers: int = 4
    subscribers_per_session: int = 2
    replay_every: int = 10
    # What the senders write: "turn", or "push" for the smallest idempotent authenticated POST that writes one
    # row (``POST /api/v1/inbox/push-subscriptions/``, one browser's subscription per sender, stored again each
    # time), the baseline a turn's throughput is set beside.
    sends: str = "turn"


@dataclass(frozen=True)
class SentTurn:
    session_id: str
    key: str
    turn_id: str
    text: str
    node: str


@dataclass
class Subscription:
    session_id: str
    node: str
    seqs: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)


@dataclass
class LoadResult:
    config: LoadConfig
    elapsed: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=dict)  # kind -> seconds per call
    errors: list[str] = field(default_factory=list)
    turns: list[SentTurn] = field(default_factory=list)
    replays: int = 0
    subscriptions: list[Subscription] = field(default_factory=list)
    last_seq: dict[str, int] = field(default_factory=dict)  # session -> its last seq when the run ended
    key_prefix: str = ""

    def record(self, kind: str, seconds: float) -> None:
        self.latencies.setdefault(kind, []).append(seconds)

    def report(self) -> str:
        width = max((len(kind) for kind in self.latencies), default=10)
        nodes = ", ".join(self.config.nodes)
        lines = [f"load: {self.elapsed:.1f}s against {nodes}, {len(self.config.sessions)} sessions"]
        lines.append(f"  {'kind':<{width}}  {'count':>7}  {'per s':>8}  {'p50 ms':>8}  {'p95 ms':>8}")
        for kind, values in sorted(self.latencies.items()):
            rate = len(values) / self.elapsed if self.elapsed else 0.0
            p50, p95 = percentile(values, 0.50) * 1000, percentile(values, 0.95) * 1000
            lines.append(f"  {kind:<{width}}  {len(values):>7}  {rate:>8.1f}  {p50:>8.1f}  {p95:>8.1f}")
        frames = sum(len(s.seqs) for s in self.subscriptions)
        rate = frames / self.elapsed if self.elapsed else 0.0
        lines.append(
            f"  turns {len(self.turns)} (+{self.replays} replays); {len(self.subscriptions)} websocket subscribers "
            f"received {frames} events ({rate:.1f}/s); errors {len(self.errors)}"
        )
        return "\n".join(lines)


class _Run:
    def __init__(self, config: LoadConfig) -> None:
        self.config = config
        self.result = LoadResult(config=config, key_prefix=f"load-{uuid.uuid4().hex[:8]}")
        self.deadline = 0.0
        self.counter = itertools.count()
        self.headers = {"Authorization": f"Bearer {config.token}"}

    def _client(self, node: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=node, headers=self.headers, timeout=30, trust_env=False)

    def _error(self, what: str) -> None:
        if len(self.result.errors) < 1000:
            self.result.errors.append(what)

    async def _timed(self, kind: str, call: Any) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            response: httpx.Response = await call
        except httpx.HTTPError as exc:
            self._error(f"{kind}: {exc.__class__.__name__}: {exc}")
            return None
        self.result.record(kind, time.perf_counter() - started)
        if not 200 <= response.status_code < 300:
            self._error(f"{kind}: {response.status_code} {response.text[:300]}")
            return None
        return response

    async def turn_sender(self, index: int) -> None:
        node = self.config.nodes[index % len(self.config.nodes)]
        if self.config.sends == "push":
            await self.push_sender(node, index)
            return
        async with self._client(node) as client:
            while time.monotonic() < self.deadline:
                n = next(self.counter)
                session_id = self.config.sessions[n % len(self.config.sessions)]
                key = f"{self.result.key_prefix}-{n}"
                text = f"hello from the load run, turn {n}"
                path = f"/api/v1/sessions/{session_id}/turns/"
                sent = await self._timed(
                    "POST turn", client.post(path, json={"text": text}, headers={"Idempotency-Key": key})
                )
                if sent is None:
                    continue
                turn_id = str(sent.json()["turn_id"])
                self.result.turns.append(SentTurn(session_id, key, turn_id, text, node))
                if n % self.config.replay_every == 0:
                    await self._replay(client, path, key, text, turn_id)

    async def push_sender(self, node: str, index: int) -> None:
        body = push_subscription(f"{self.result.key_prefix}-{index}")
        async with self._client(node) as client:
            while time.monotonic() < self.deadline:
                await self._timed("POST push-subscription", client.post(PUSH_PATH, json=body))

    async def _replay(self, client: httpx.AsyncClient, path: str, key: str, text: str, turn_id: str) -> None:
        again = await self._timed(
            "POST turn (replay)", client.post(path, json={"text": text}, headers={"Idempotency-Key": key})
        )
        if again is None:
            return
        self.result.replays += 1
        if again.headers.get("Idempotency-Replayed") != "true" or again.json().get("turn_id") != turn_id:
            self._error(f"replay of {key} was handled again: {again.headers} {again.text[:200]}")

    async def rest_reader(self, index: int) -> None:
        node = self.config.nodes[index % len(self.config.nodes)]
        rng = random.Random(index)  # the load's shape, not a secret
        async with self._client(node) as client:
            while time.monotonic() < self.deadline:
                session_id = rng.choice(self.config.sessions)
                await self._timed("GET sessions", client.get("/api/v1/sessions/"))
                cursor = rng.randint(0, 50)
                await self._timed(
                    "GET events", client.get(f"/api/v1/sessions/{session_id}/events/?cursor={cursor}&limit=100")
                )
                await self._timed("GET memory", client.get("/api/v1/memory/"))

    async def subscriber(self, sub: Subscription, ready: asyncio.Event, finished: asyncio.Event) -> None:
        url = sub.node.replace("http", "ws", 1) + f"/ws/sessions/{sub.session_id}/stream/?cursor=0"
        try:
            async with connect(url, additional_headers=self.headers, proxy=None, open_timeout=30, max_queue=None) as ws:
                ready.set()
                while True:
                    target = self.result.last_seq.get(sub.session_id)
                    if finished.is_set() and target is not None and (sub.seqs[-1] if sub.seqs else 0) >= target:
                        return
                    try:
                        raw = await asyncio.wait_for(ws.recv(), timeout=1.0)
                    except TimeoutError:
                        continue
                    frame = json.loads(raw)
                    if frame["seq"] is not None:
                        sub.seqs.append(int(frame["seq"]))
                        sub.kinds.append(str(frame["kind"]))
        except Exception as exc:  # a dropped socket is an error of the run, whatever raised it
            self._error(f"subscriber {sub.session_id}@{sub.node}: {exc.__class__.__name__}: {exc}")
            ready.set()

    async def last_seqs(self) -> dict[str, int]:
        found: dict[str, int] = {}
        async with self._client(self.config.nodes[0]) as client:
            for session_id in self.config.sessions:
                response = await client.get(f"/api/v1/sessions/{session_id}/events/?limit=1")
                response.raise_for_status()
                found[session_id] = int(response.json()["last_seq"])
        return found

    async def run(self) -> LoadResult:
        nodes = self.config.nodes
        finished = asyncio.Event()
        subs = [
            Subscription(session_id=session_id, node=nodes[(i + j) % len(nodes)])
            for i, session_id in enumerate(self.config.sessions)
            for j in range(self.config.subscribers_per_session)
        ]
        self.result.subscriptions = subs
        readies = [asyncio.Event() for _ in subs]
        listening = [asyncio.create_task(self.subscriber(s, r, finished)) for s, r in zip(subs, readies, strict=True)]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), timeout=60)
        started = time.monotonic()
        self.deadline = started + self.config.seconds
        await asyncio.gather(
            *(self.turn_sender(i) for i in range(self.config.turn_senders)),
            *(self.rest_reader(i) for i in range(self.config.rest_readers)),
        )
        self.result.elapsed = time.monotonic() - started
        self.result.last_seq = await self.last_seqs()
        finished.set()
        _, pending = await asyncio.wait(listening, timeout=CATCH_UP_SECONDS) if listening else (set(), set())
        for task in pending:
            task.cancel()
            self._error("a subscriber did not reach the last event in time")
        await asyncio.gather(*pending, return_exceptions=True)
        return self.result


async def run_load(config: LoadConfig) -> LoadResult:
    return await _Run(config).run()


def push_subscription(name: str) -> dict[str, Any]:
    """A browser's Web Push subscription as the browser hands it over (keys of the right sizes, base64url)."""
    public_key = base64.urlsafe_b64encode(b"\x04" + b"k" * 64).decode()  # uncompressed P-256 point: 65 bytes
    keys = {"p256dh": public_key, "auth": base64.urlsafe_b64encode(b"push-auth-secret").decode()}  # 16 bytes
    return {"endpoint": f"https://push.example.com/send/{name}", "keys": keys}


def load_seconds() -> float:
    return float(os.environ.get("TESS_LOAD_SECONDS", DEFAULT_SECONDS))


def stream_problems(result: LoadResult) -> list[str]:
    """What the clients alone can check: each subscriber saw 1..last seq of its session, once, in order."""
    problems = []
    for sub in result.subscriptions:
        expected = list(range(1, result.last_seq[sub.session_id] + 1))
        if sub.seqs[: len(expected)] != expected:
            problems.append(f"subscriber {sub.session_id}@{sub.node} did not see every event exactly once in order")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", action="append", required=True, help="a node's base URL (repeat for each)")
    parser.add_argument("--token", default=os.environ.get("TESS_TOKEN", ""), help="personal token (or TESS_TOKEN)")
    parser.add_argument("--session", action="append", required=True, help="a session id to load (repeat)")
    parser.add_argument("--seconds", type=float, default=load_seconds())
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("a personal token is needed (--token or TESS_TOKEN)")
    result = asyncio.run(
        run_load(LoadConfig(nodes=args.node, token=args.token, sessions=args.session, seconds=args.seconds))
    )
    print(result.report())
    problems = result.errors + stream_problems(result)
    for problem in problems[:20]:
        print("ERROR:", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
