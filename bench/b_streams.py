"""Stream fan-out: 100 websocket subscribers on one session through the production tier, with channels-redis.

Tess's path: an event is committed to PostgreSQL, a wake-up carrying only its seq goes through
channels-redis, and each subscriber's consumer reads the events from the database and sends them. Tess runs
as deployed (``bench/topology.py``: daphne from ``tess-ws.service`` under the production settings, nginx in
front; subscribers connect through nginx). Baseline, in the same run: a bare Channels consumer forwarding raw
``group_send`` payloads (no authentication, no database) to the same number of subscribers, offered the same
event rate, on a daphne of its own (``bench/streams_asgi.py``; reached directly, no proxy).

Events are produced by one writer as fast as committing allows (``event_append``, one transaction per
event) for ``BENCH_STREAM_SECONDS`` (20). Reported: events per second delivered to each subscriber, p50
and p99 latency from commit to receipt, and lost or duplicated events (printed beside the table).

Catch-up: ``BENCH_STREAM_CATCHUP_EVENTS`` (100,000) events already stored, one client connecting from the
cursor before them; the events per second it receives, beside the live fan-out rate above (a backlog
should arrive far faster than live events can be produced, not one batch per re-check tick).
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import quote

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import connection

from bench.common import Row, percentile
from bench.topology import production_tier

SUBSCRIBERS = 100
CLIENT_PROCESSES = 4
SECONDS = float(os.environ.get("BENCH_STREAM_SECONDS", "20"))
# A second pair at a load one server process can carry (a busy pump writes a few events per second).
PACED_RATE = float(os.environ.get("BENCH_STREAM_PACED_RATE", "20"))
CATCHUP_EVENTS = int(os.environ.get("BENCH_STREAM_CATCHUP_EVENTS", "100000"))
ROOT = Path(__file__).resolve().parent.parent
PREFIX = "tess-bench"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _database_url() -> str:
    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"], safe="")
    return f"postgres://{credentials}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or '5432'}/{quote(db['NAME'], safe='')}"


def _use_redis_layer(redis_url: str) -> None:
    """This process pushes wake-ups through the same channels-redis as the server."""
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_url], "prefix": f"{PREFIX}:asgi", "capacity": 1000},
        }
    }
    channel_layers.backends.clear()


def _answers(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except OSError:
        return False


def _start_server(port: int, redis_url: str, log: Path | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    env.update(
        DJANGO_SETTINGS_MODULE="tess_site.settings.test",
        DATABASE_URL=_database_url(),
        REDIS_URL=redis_url,
        TESS_CHANNEL_PREFIX=PREFIX,
        DB_CONN_MAX_AGE="60",
        TESS_LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
    )
    daphne = str(Path(sys.executable).parent / "daphne")
    process = subprocess.Popen(
        [daphne, "-b", "127.0.0.1", "-p", str(port), "bench.streams_asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=log.open("ab") if log else subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not _answers(port):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the benchmark's daphne did not start")
        time.sleep(0.2)
    return process


def _measure(url: str, headers: dict[str, str], produce: Any, *, first_seq: int) -> dict[str, float]:
    """Subscribe, run ``produce(deadline) -> (count, started)``, then collect what every subscriber got."""
    from bench.stream_clients import run_clients

    ctx = multiprocessing.get_context("spawn")
    ready, done, final, results = ctx.Value("i", 0), ctx.Event(), ctx.Value("q", 0), ctx.Queue()
    per = SUBSCRIBERS // CLIENT_PROCESSES
    procs = [
        ctx.Process(target=run_clients, args=(url, headers, per, ready, done, final, results))
        for _ in range(CLIENT_PROCESSES)
    ]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + 60
    while ready.value < SUBSCRIBERS:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {ready.value} subscribers connected")
        time.sleep(0.05)
    time.sleep(0.5)
    count, started = produce(time.monotonic() + SECONDS)
    final.value = first_seq + count - 1
    done.set()
    subs: list[dict[str, Any]] = []
    for _ in procs:
        subs.extend(results.get(timeout=120))
    for proc in procs:
        proc.join(timeout=30)
    latencies = [x * 1000 for sub in subs for x in sub["latencies"]]
    unique = sum(len(set(sub["seqs"])) for sub in subs)
    received = sum(len(sub["seqs"]) for sub in subs)
    rates = [len(set(s["seqs"])) / max(s["last"] - started, 1e-9) for s in subs if s["seqs"]]
    return {
        "events": count,
        "rate": sum(rates) / len(rates) if rates else 0.0,
        "p50": percentile(latencies, 0.50) if latencies else float("nan"),
        "p99": percentile(latencies, 0.99) if latencies else float("nan"),
        "lost": count * SUBSCRIBERS - unique,
        "duplicated": received - unique,
    }


def run() -> list[Row]:
    from channels.layers import get_channel_layer

    from sessions_app import services
    from sessions_app.models import Session
    from sessions_app.stream import EventKind, system_body
    from tess_site.accounts import services as accounts
    from tess_site.accounts.selectors import roles_for
    from tess_site.scope import Channel, Role, Scope

    redis_url = settings.REDIS_URL or os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
    _use_redis_layer(redis_url)
    tenant = accounts.tenant_create(slug=f"bench-streams-{uuid.uuid4().hex[:8]}")
    user, _ = accounts.user_ensure(username=f"bench-{tenant.slug}", password="bench-pass-1234")
    accounts.membership_grant(tenant=tenant, user=user, role=Role.OPERATOR)
    scope = Scope(
        tenant=tenant,
        actor=user,
        channel=Channel.CLI,
        correlation_id="bench-streams",
        roles=roles_for(user=user, tenant=tenant),
    )
    token = accounts.token_issue(scope=scope, name="bench").plaintext
    session = Session.objects.create(
        tenant=tenant, owner=user, title="bench", provider_instance="bench", runtime_id=uuid.uuid4().hex
    )
    port = _free_port()
    layer = get_channel_layer()
    assert layer is not None
    send = async_to_sync(layer.group_send)
    headers = {"Authorization": f"Bearer {token}"}

    def produce_tess(rate: float | None) -> Any:
        def produce(deadline: float) -> tuple[int, float]:
            started, n, t0 = time.time(), 0, time.monotonic()
            while time.monotonic() < deadline:
                services.event_append(
                    session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text=f"{time.time():.6f}")
                )
                n += 1
                _pace(t0, n, rate)
            return n, started

        return produce

    def produce_raw(group: str, rate: float) -> Any:
        def produce(deadline: float) -> tuple[int, float]:
            started, n, t0 = time.time(), 0, time.monotonic()
            while time.monotonic() < deadline:
                n += 1
                payload = f'{{"seq": {n}, "kind": "system", "ts": "", "body": {{"text": "{time.time():.6f}"}}}}'
                send(group, {"type": "raw.event", "text": payload})
                _pace(t0, n, rate)
            return n, started

        return produce

    def pair(rate: float | None) -> tuple[dict[str, float], dict[str, float]]:
        cursor = Session.objects.values_list("last_seq", flat=True).get(pk=session.pk)
        ours = _measure(tess_url.format(cursor=cursor), headers, produce_tess(rate), first_seq=cursor + 1)
        offered = ours["events"] / SECONDS
        group = f"bench-raw-{uuid.uuid4().hex[:12]}"
        base = _measure(f"ws://127.0.0.1:{port}/bench/raw/{group}/", {}, produce_raw(group, offered), first_seq=1)
        print(
            f"\nstream fan-out ({SUBSCRIBERS} subscribers, {SECONDS:.0f} s, "
            f"{'as fast as committing allows' if rate is None else f'paced at {rate:.0f}/s'}): Tess wrote "
            f"{ours['events']:.0f} events ({offered:.0f}/s), lost {ours['lost']:.0f}, duplicated "
            f"{ours['duplicated']:.0f} | baseline sent {base['events']:.0f} at the same rate, lost {base['lost']:.0f}, "
            f"duplicated {base['duplicated']:.0f}"
        )
        return ours, base

    def catch_up() -> float:
        """Events per second one client receives of a stored backlog, from connecting to the last one."""
        from websockets.sync.client import connect

        from sessions_app import journal

        cursor = Session.objects.values_list("last_seq", flat=True).get(pk=session.pk)
        for start in range(0, CATCHUP_EVENTS, 5_000):
            items = [
                (EventKind.SYSTEM, system_body(text=f"backlog {i}"))
                for i in range(start, min(CATCHUP_EVENTS, start + 5_000))
            ]
            journal.events_append(session_id=session.pk, items=items)
        last, expected = cursor + CATCHUP_EVENTS, cursor
        started = time.monotonic()
        with connect(
            tess_url.format(cursor=cursor), additional_headers=headers, proxy=None, max_size=None, open_timeout=30
        ) as ws:
            while expected < last:
                frame = json.loads(ws.recv(timeout=120))
                if frame["seq"] is None:
                    continue
                expected += 1
                if frame["seq"] != expected:
                    raise RuntimeError(f"catch-up sent seq {frame['seq']} where {expected} was due")
        rate = CATCHUP_EVENTS / (time.monotonic() - started)
        print(f"\nstream catch-up: {CATCHUP_EVENTS} stored events reached one client in order at {rate:.0f}/s")
        return rate

    raw_log = Path(tempfile.mkdtemp(prefix="tess-bench-raw-")) / "daphne.log"
    stack = ExitStack()
    stack.callback(shutil.rmtree, raw_log.parent, ignore_errors=True)
    try:
        stack.callback(_stop, _start_server(port, redis_url, raw_log))  # the baseline's bare consumer
        tier = stack.enter_context(
            production_tier("streams", TESS_CHANNEL_PREFIX=PREFIX, TESS_MODEL_ADAPTER="deterministic")
        )
        tess_url = f"ws://127.0.0.1:{tier.port}/ws/sessions/{session.pk}/stream/?cursor={{cursor}}"
        full = pair(None)
        paced = pair(PACED_RATE)
        backlog = catch_up()
    except BaseException:
        if raw_log.exists():
            print(
                f"--- the baseline's daphne ({raw_log}):\n{raw_log.read_text(errors='replace')[-3000:]}",
                file=sys.stderr,
            )
        raise
    finally:
        stack.close()
    rows = []
    for label, (ours, base) in (("max", full), (f"{PACED_RATE:.0f}/s", paced)):
        rows += [
            Row(
                f"stream {label}: events/s to each of 100 subs",
                "bare Channels group_send, same rate",
                base["rate"],
                ours["rate"],
                unit="/s",
            ),
            Row(
                f"stream {label}: commit → receipt p50", "group_send → receipt p50", base["p50"], ours["p50"], unit="ms"
            ),
            Row(
                f"stream {label}: commit → receipt p99", "group_send → receipt p99", base["p99"], ours["p99"], unit="ms"
            ),
        ]
    rows.append(
        Row(
            f"catch-up: {CATCHUP_EVENTS // 1000}k stored, events/s to 1 client",
            "stream max: live events/s to each sub",
            full[0]["rate"],
            backlog,
            unit="/s",
        )
    )
    return rows


def _stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()


def _pace(t0: float, n: int, rate: float | None) -> None:
    if rate:
        pause = t0 + n / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
