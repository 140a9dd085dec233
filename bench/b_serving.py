"""Which server serves Tess's HTTP API best: the same closed-loop load against each, in turns.

Every server runs Tess (``tess_site.wsgi`` or ``tess_site.asgi``) with the psycopg pool on (one daphne without
it, for comparison) against this run's database and Redis. The load is ``bench/load.py``'s four
turn senders and four REST readers (no websockets: they stay on daphne in every topology) over real HTTP on
this machine, ``BENCH_SERVING_SECONDS`` (8) against one server after the other (each started, warmed up,
measured and stopped), for ``BENCH_SERVING_ROUNDS`` (3) rounds, so a machine busy with something else weighs
on every server alike. Baseline: daphne with the
pool (one process, as ``tess-ws.service`` runs it). Reported per server: turn p50 and p95 over all rounds,
turns per second, GET p50, and the CPU time the server's processes spent per request served (user and
system, all its workers and threads): latencies depend on what else the machine runs, CPU per request much
less. Errors are printed beside the table and must be 0.

``BENCH_SERVING_WORKERS`` (2) and ``BENCH_SERVING_THREADS`` (8 per worker) size the multi-process servers.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from bench.b_streams import _database_url, _free_port
from bench.common import Row, percentile
from bench.load import LoadConfig, LoadResult, run_load

SECONDS = float(os.environ.get("BENCH_SERVING_SECONDS", "8"))
ROUNDS = int(os.environ.get("BENCH_SERVING_ROUNDS", "3"))
WORKERS = os.environ.get("BENCH_SERVING_WORKERS", "2")
THREADS = os.environ.get("BENCH_SERVING_THREADS", "8")
SESSIONS = 4
ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Server:
    name: str
    argv: list[str]  # {port} is replaced
    pool: bool = True


def _gunicorn(workers: str, threads: str) -> list[str]:
    conf = ["-c", "python:tess_site.gunicorn_conf", "--bind", "127.0.0.1:{port}"]
    return [str(BIN / "gunicorn"), *conf, "--workers", workers, "--threads", threads, "tess_site.wsgi:application"]


def _granian(workers: str, threads: str) -> list[str]:
    interface = ["--interface", "wsgi", "--port", "{port}", "--access-log"]
    sizes = ["--workers", workers, "--blocking-threads", threads]
    return [str(BIN / "granian"), *interface, *sizes, "tess_site.wsgi:application"]


def servers() -> list[Server]:
    daphne = [str(BIN / "python"), "-m", "tess_site.asgi_server", "-p", "{port}", "tess_site.asgi:application"]
    uvicorn = [str(BIN / "uvicorn"), "--port", "{port}", "--workers", WORKERS, "tess_site.asgi:application"]
    return [
        Server("daphne, 1 process (ASGI)", daphne),
        Server("daphne, 1 process (ASGI), no pool", daphne, pool=False),
        Server(f"uvicorn, {WORKERS} workers (ASGI)", uvicorn),
        Server("gunicorn gthread, 1 worker x 8 threads", _gunicorn("1", "8")),
        Server(f"gunicorn gthread, {WORKERS} workers x {THREADS} threads", _gunicorn(WORKERS, THREADS)),
        Server("granian WSGI, 1 worker x 8 threads", _granian("1", "8")),
        Server(f"granian WSGI, {WORKERS} workers x {THREADS} threads", _granian(WORKERS, THREADS)),
    ]


def _answers(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        conn.request("GET", "/healthz")
        return conn.getresponse().status in (200, 503)
    except OSError:
        return False


def _start(server: Server, port: int, redis_url: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    env.update(
        DJANGO_SETTINGS_MODULE="tess_site.settings.test",
        DATABASE_URL=_database_url(),
        REDIS_URL=redis_url,
        TESS_CHANNEL_PREFIX="tess-bench-serving",
        TESS_DB_POOL="1" if server.pool else "0",
        DB_CONN_MAX_AGE="60",
        TESS_DB_POOL_MAX=THREADS,
        TESS_SERVE_STATIC="0",
        TESS_TOKEN_RATE="100000/min",
        PYTHONPATH=str(ROOT),
    )
    argv = [arg.replace("{port}", str(port)) for arg in server.argv]
    process = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 60
    while not _answers(port):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{server.name} did not start")
        time.sleep(0.2)
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def _cpu_seconds(group: int) -> float:
    """User and system CPU time of every process in the server's process group (its workers included)."""
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        if int(fields[2]) == group:  # pgrp
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _measure(port: int, token: str, sessions: list[str], seconds: float) -> LoadResult:
    config = LoadConfig(
        nodes=[f"http://127.0.0.1:{port}"], token=token, sessions=sessions, seconds=seconds, subscribers_per_session=0
    )
    return asyncio.run(run_load(config))


def _requests(result: LoadResult) -> int:
    return sum(len(values) for values in result.latencies.values())


def _merge(results: list[LoadResult]) -> LoadResult:
    merged = LoadResult(config=results[0].config)
    for result in results:
        merged.elapsed += result.elapsed
        merged.errors += result.errors
        for kind, values in result.latencies.items():
            merged.latencies.setdefault(kind, []).extend(values)
    return merged


def run() -> list[Row]:
    from sessions_app.models import Session
    from tess_site.accounts import services as accounts
    from tess_site.accounts.selectors import roles_for
    from tess_site.scope import Channel, Role, Scope

    redis_url = settings.REDIS_URL or os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
    tenant = accounts.tenant_create(slug=f"bench-serving-{uuid.uuid4().hex[:8]}")
    user, _ = accounts.user_ensure(username=f"bench-{tenant.slug}", password="bench-pass-1234")
    accounts.membership_grant(tenant=tenant, user=user, role=Role.OPERATOR)
    roles = roles_for(user=user, tenant=tenant)
    scope = Scope(tenant=tenant, actor=user, channel=Channel.CLI, correlation_id="bench-serving", roles=roles)
    token = accounts.token_issue(scope=scope, name="bench").plaintext
    sessions = [
        str(
            Session.objects.create(
                tenant=tenant, owner=user, title=f"serving {i}", provider_instance="bench", runtime_id=uuid.uuid4().hex
            ).pk
        )
        for i in range(SESSIONS)
    ]
    results: dict[str, list[LoadResult]] = {}
    cpu: dict[str, list[tuple[float, int]]] = {}  # server -> (CPU seconds, requests served) per round
    for _ in range(ROUNDS):
        for server in servers():
            # One server at a time: pools of servers left idle would hold connections others need.
            port = _free_port()
            process = _start(server, port, redis_url)
            try:
                _measure(port, token, sessions, 2.0)  # warm-up: first-request imports, the pool's connections
                before = _cpu_seconds(process.pid)
                result = _measure(port, token, sessions, SECONDS)
                cpu.setdefault(server.name, []).append((_cpu_seconds(process.pid) - before, _requests(result)))
                results.setdefault(server.name, []).append(result)
            finally:
                _stop(process)
    measured = [(server, _merge(results[server.name])) for server in servers()]
    print(
        f"\nserving: {ROUNDS} rounds of {SECONDS:.0f} s closed loop on each server in turn, 4 turn senders + 4 REST"
        " readers, same database and Redis"
    )
    columns = f"{'turn p50':>9} {'turn p95':>9} {'turns/s':>8} {'GET p50':>8} {'CPU/req':>8} {'errors':>7}"
    print(f"  {'server':<44} {columns}")
    for server, result in measured:
        turns = result.latencies.get("POST turn", [])
        reads = [x for kind, xs in result.latencies.items() if kind.startswith("GET") for x in xs]
        print(
            f"  {server.name:<44} {percentile(turns, 0.5) * 1000:>7.1f}ms {percentile(turns, 0.95) * 1000:>7.1f}ms"
            f" {len(turns) / result.elapsed:>8.1f} {percentile(reads, 0.5) * 1000:>6.1f}ms"
            f" {_cpu_ms_per_request(cpu[server.name]):>6.2f}ms {len(result.errors):>7}"
        )
        for error in result.errors[:3]:
            print(f"    error: {error}")
    base_server, base = measured[0]
    base_cpu = _cpu_ms_per_request(cpu[base_server.name])
    base_turns = base.latencies["POST turn"]
    rows = []
    for server, result in measured[1:]:
        turns = result.latencies.get("POST turn", [])
        rows += [
            Row(f"{server.name}: turn p50", f"{base_server.name}: turn p50", percentile(base_turns, 0.5) * 1000,
                percentile(turns, 0.5) * 1000, unit="ms"),
            Row(f"{server.name}: turns/s", f"{base_server.name}: turns/s", len(base_turns) / base.elapsed,
                len(turns) / result.elapsed, unit="/s"),
            Row(f"{server.name}: server CPU per request", f"{base_server.name}: CPU per request", base_cpu,
                _cpu_ms_per_request(cpu[server.name]), unit="ms"),
        ]  # fmt: skip
    return rows


def _cpu_ms_per_request(rounds: list[tuple[float, int]]) -> float:
    return 1000 * sum(seconds for seconds, _ in rounds) / max(1, sum(n for _, n in rounds))
