"""32 turns waiting on a 2-second model at once, and what the rest of the server does meanwhile.

The production tier (``bench/topology.py``: gunicorn and daphne from their units, nginx in front) runs the
``openai_compatible`` adapter against a local chat-completions stand-in over HTTP
(``tests/providers_app/chat_standin.py``, its ``slow`` model: every answer takes
``BENCH_MODEL_SECONDS`` (2) seconds). The stand-in and the 32 turn clients stand for machines elsewhere (a
model provider, the operators' laptops): they run in a process of their own at the lowest CPU priority
(``bench/fleet_model_outside.py``), so that on this machine they take only the CPU the servers leave.
Four probe clients, each sending one request every 50 ms through nginx
(two ``GET /healthz``, two ``GET /api/v1/sessions/`` of an operator with 4 sessions), run in windows of
``BENCH_MODEL_PROBE_SECONDS`` (10): idle, then while 32 clients keep a turn each in flight (closed loop: a new
turn as soon as one answers), ``BENCH_MODEL_ROUNDS`` (2) times in turn, so that the idle and the busy figure
span the same stretch of time. Before the first window the bench waits until no autovacuum worker is at work
and writes a checkpoint: after a benchmark that wrote thousands of rows, PostgreSQL's catching up would
otherwise fall into some windows and not others. Meanwhile ``pg_stat_activity`` is sampled for this database.

The 32 turns are sent spread over the model's time (turn ``i`` after ``i / 32`` of it), so that they keep
arriving and finishing at an even rate, as a fleet's operators' turns do; sent at the same instant, a closed
loop keeps them in step for the whole run, and every 2 s the servers have 32 answers to write at once (about
half a second of both cores here), which the probes would wait behind whatever the serving design. That herd
is measured too, as a figure without a target (``BENCH_MODEL_HERD=0`` leaves it out).

Targets: each probe's p95 during the turns at most 2x its idle p95 (a turn waiting on the model holds a
gunicorn thread, so the threads must outnumber the waiting turns: ``TESS_WEB_THREADS``, see the README); and
no more PostgreSQL connections than the pools may hold ((workers + daphne) x ``TESS_DB_POOL_MAX``), however
many turns wait (a turn gives its connection back before it asks the model). ``BENCH_MODEL_WEB_THREADS``
sets gunicorn's threads for this run instead of the unit's default, to see what too few do.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import Row, percentile
from bench.topology import BackendSampler, bench_operator, database_settled, production_tier

MODEL_SECONDS = float(os.environ.get("BENCH_MODEL_SECONDS", "2"))
PROBE_SECONDS = float(os.environ.get("BENCH_MODEL_PROBE_SECONDS", "10"))
ROUNDS = int(os.environ.get("BENCH_MODEL_ROUNDS", "2"))
WEB_THREADS = os.environ.get("BENCH_MODEL_WEB_THREADS", "")
HERD = os.environ.get("BENCH_MODEL_HERD", "1") != "0"
TURNS = 32
PROBE_EVERY = 0.05
PROBES = {"GET /healthz": "/healthz", "GET sessions list": "/api/v1/sessions/"}


def _client(url: str, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120, trust_env=False)


async def _probe(url: str, token: str, path: str, seconds: float, out: list[float], errors: list[str]) -> None:
    async with _client(url, token) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            response = await client.get(path)
            elapsed = time.perf_counter() - started
            if response.status_code != 200:
                errors.append(f"{path}: {response.status_code} {response.text[:200]}")
            out.append(elapsed * 1000)
            await asyncio.sleep(max(0.0, PROBE_EVERY - elapsed))


async def _probes(url: str, token: str, seconds: float, errors: list[str]) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {name: [] for name in PROBES}
    await asyncio.gather(
        *(_probe(url, token, path, seconds, found[name], errors) for name, path in PROBES.items() for _ in range(2))
    )
    return found


class Outside:
    """The stand-in and the turn clients, in ``bench/fleet_model_outside.py`` at nice 19."""

    def __init__(self) -> None:
        command = [sys.executable, "-m", "bench.fleet_model_outside", "--model-seconds", str(MODEL_SECONDS)]
        root = Path(__file__).resolve().parent.parent
        self.process = subprocess.Popen(command, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.base_url = str(self._read()["standin"])

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the outside process ended (exit {self.process.wait()})")
        return dict(json.loads(line))

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    async def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        self._send(message)
        return await asyncio.to_thread(self._read)

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


Probed = dict[str, list[float]]


async def _while_turns_wait(
    outside: Outside,
    url: str,
    token: str,
    sessions: list[str],
    seconds: float,
    errors: list[str],
    *,
    spread: bool = True,
) -> tuple[Probed, list[float]]:
    """Probe for ``seconds`` with TURNS turns in flight all along (sent spread over the model's time, or all at
    once); the probes and every turn's time (ms)."""
    job = {"url": url, "token": token, "sessions": sessions, "count": TURNS, "spread": spread}
    await outside.ask({"turns": job})  # every turn sent and waiting on the model
    busy = await _probes(url, token, seconds, errors)
    answered = await outside.ask({"stop": True})
    errors.extend(answered["errors"])
    return busy, list(answered["turns"])


async def _measure(
    outside: Outside, url: str, token: str, sessions: list[str]
) -> tuple[Probed, Probed, Probed | None, list[float], list[str]]:
    errors: list[str] = []
    # Warm-up: every worker's first turn imports what a model turn needs, and the pools open connections.
    await _while_turns_wait(outside, url, token, sessions, 2.0, errors)
    settled = await asyncio.to_thread(database_settled)
    print(f"\nfleet model: the database was quiet after {settled:.1f} s")
    # Idle and busy windows alternate, so that both figures span the same stretch of the run: whatever else
    # the machine does meanwhile falls on both, not on one of them.
    idle: Probed = {name: [] for name in PROBES}
    busy: Probed = {name: [] for name in PROBES}
    turns: list[float] = []
    for _ in range(ROUNDS):
        for name, times in (await _probes(url, token, PROBE_SECONDS, errors)).items():
            idle[name] += times
        waited, answered = await _while_turns_wait(outside, url, token, sessions, PROBE_SECONDS, errors)
        for name, times in waited.items():
            busy[name] += times
        turns += answered
    herd = None
    if HERD:
        herd = (await _while_turns_wait(outside, url, token, sessions, PROBE_SECONDS, errors, spread=False))[0]
    return idle, busy, herd, turns, errors


def run() -> list[Row]:
    token, sessions = bench_operator("fleet-model", sessions=4)
    outside = Outside()
    model = {"TESS_MODEL_ADAPTER": "openai_compatible", "TESS_MODEL_BASE_URL": outside.base_url, "TESS_MODEL": "slow"}
    threads = {"TESS_WEB_THREADS": WEB_THREADS} if WEB_THREADS else {}
    try:
        with production_tier("model", **model, **threads) as tier, BackendSampler() as sampler:
            idle, busy, herd, turns, errors = asyncio.run(_measure(outside, tier.url, token, sessions))
            capacity = tier.pool_capacity
    finally:
        outside.stop()
    print(
        f"\nfleet model: {TURNS} turns in flight on a {MODEL_SECONDS:.0f} s model ({len(turns)} answered, p50"
        f" {percentile(turns, 0.5):.0f} ms); gunicorn threads {WEB_THREADS or 'as the unit sets them'};"
        f" PostgreSQL backends at most {sampler.most} ({sampler.most_busy} busy at once) over {sampler.samples}"
        f" samples, the pools hold at most {capacity}; an autovacuum worker at work in {sampler.autovacuum}"
        f" samples; errors {len(errors)}"
    )
    for error in errors[:5]:
        print(f"  error: {error}")
    rows = [
        Row(f"fleet model: {name} p95, {TURNS} turns wait", f"{name} p95, idle",
            percentile(idle[name], 0.95), percentile(busy[name], 0.95), unit="ms", at_most=2.0)
        for name in PROBES
    ]  # fmt: skip
    if herd is not None:
        rows += [
            Row(f"fleet model: {name} p95, {TURNS} turns sent at once", f"{name} p95, idle",
                percentile(idle[name], 0.95), percentile(herd[name], 0.95), unit="ms")
            for name in PROBES
        ]  # fmt: skip
    rows.append(
        Row(f"fleet model: DB backends, {TURNS} turns waiting", "what the pools hold", capacity, sampler.most,
            unit="", at_most=1.0)
    )  # fmt: skip
    made = [*idle.values(), *busy.values(), *(herd.values() if herd else ()), turns]
    rows.append(Row("fleet model: errors", "requests made", sum(map(len, made)),
                    len(errors), unit="", at_most=0.0))  # fmt: skip
    return rows
