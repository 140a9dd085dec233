"""The fleet board: how soon a waiting agent reaches its owner's inbox, and what a page of 1,000 sessions costs.

Waiting to inbox: a real tmux agent (its own tmux server) works, printing a time-stamped ``mark`` line every
0.3 s, until told to ask ``Continue? [y/N]``; it writes the moment it asks to a file. A pump thread in this
process runs ``session_pump`` every ``TESS_PUMP_INTERVAL_MS`` as the workers do; a real daphne (Tess's ASGI
app, channels-redis) serves the owner's ``/ws/me/`` and the session's stream. Measured over
``BENCH_BOARD_TRIALS`` (50) trials: from the agent asking to the ``inbox.item`` arriving on ``/ws/me/``;
baseline, in the same run: from a ``mark`` line being printed to it arriving on the stream socket. A question
is only a question once the pane has been quiet for the instance's ``quiet_seconds`` and has stood for its
debounce since the output stopped (the longer of the two: the hold), so the targets are p95 at most 2 s, and
at most 2x the output p95 plus the hold.

Board page: 1,000 running sessions of one owner; ``GET /board/`` (a page of 50 rows with counts) beside
``GET /api/v1/sessions/`` (one page of the list, up to 200 rows), both through Django's test client, the
median over ``BENCH_ROUNDS`` of 20 requests each.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection

from bench.b_streams import _free_port, _start_server, _use_redis_layer
from bench.common import Row, per_op_us, percentile

TRIALS = int(os.environ.get("BENCH_BOARD_TRIALS", "50"))
FLEET = int(os.environ.get("BENCH_BOARD_SESSIONS", "1000"))
MARK = re.compile(r"mark (\d+\.\d+)")
AGENT = """cd "$1"
n=0
while :; do
  n=$((n+1))
  while [ ! -e "ask-$n" ]; do echo "mark $(date +%s.%N)"; sleep 0.3; done
  date +%s.%N > "asked-$n.part" && mv "asked-$n.part" "asked-$n"
  printf 'Continue? [y/N] '
  read -r answer
done
"""


def _listen(
    url: str, headers: dict[str, str], frames: queue.Queue[tuple[float, dict[str, Any]]], stop: threading.Event
) -> None:
    from websockets.sync.client import connect

    with connect(url, additional_headers=headers, open_timeout=20, proxy=None) as ws:
        while not stop.is_set():
            try:
                raw = ws.recv(timeout=0.5)
            except TimeoutError:
                continue
            frames.put((time.time(), json.loads(raw)))


def _pump(session_id: uuid.UUID, stop: threading.Event) -> None:
    from sessions_app import services

    interval = settings.TESS_PUMP_INTERVAL_MS / 1000
    while not stop.is_set():
        close_old_connections()
        services.session_pump(session_id=session_id)
        stop.wait(interval)


def _waiting_to_inbox(scope: Any, token: str, redis_url: str) -> list[Row]:
    from providers_app.registry import get_provider, reset_instances
    from providers_app.tmux import TmuxProvider
    from sessions_app import services
    from sessions_app.models import Session

    root = Path(tempfile.mkdtemp(prefix="tess-bench-board-", dir="/tmp"))
    work = root / "work"
    work.mkdir()
    (root / "agent.sh").write_text(AGENT)
    config = {"kind": "tmux", "socket": str(root / "tmux.sock"), "log_dir": str(root / "logs"), "command": ["sh"]}
    settings.TESS_RUNTIME_PROVIDERS = {"bench-tmux": config}
    reset_instances()
    provider = get_provider("bench-tmux")
    assert isinstance(provider, TmuxProvider)
    quiet = float(provider.pane_rules.quiet_seconds)
    runtime = provider.start_command(scope, title="bench", argv=["bash", str(root / "agent.sh"), str(work)])
    session = services.session_bind_started(scope=scope, owner=scope.actor, runtime=runtime, title="bench agent")
    port = _free_port()
    server = _start_server(port, redis_url)
    stop = threading.Event()
    me: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
    stream: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
    headers = {"Authorization": f"Bearer {token}"}
    threads = [
        threading.Thread(target=_listen, args=(f"ws://127.0.0.1:{port}/ws/me/", headers, me, stop), daemon=True),
        threading.Thread(
            target=_listen,
            args=(f"ws://127.0.0.1:{port}/ws/sessions/{session.pk}/stream/?cursor=0", headers, stream, stop),
            daemon=True,
        ),
        threading.Thread(target=_pump, args=(session.pk, stop), daemon=True),
    ]
    for thread in threads:
        thread.start()
    started = time.time()  # output printed before the sockets opened arrives as catch-up, not live
    key = f"session_waiting:{session.pk}"
    waits: list[float] = []
    try:
        for n in range(1, TRIALS + 1):
            deadline = time.monotonic() + 60
            while Session.objects.values_list("agent_state", flat=True).get(pk=session.pk) != "working":
                if time.monotonic() > deadline:
                    raise RuntimeError("the agent did not go back to working")
                time.sleep(0.05)
            (work / f"ask-{n}").touch()
            while True:
                received, frame = me.get(timeout=60)
                if frame.get("kind") == "inbox.item" and frame["body"].get("key") == key:
                    break
            asked = float((work / f"asked-{n}").read_text())
            waits.append((received - asked) * 1000)
            provider.send_message(session.runtime_ref, "y", f"bench-{n}", scope)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)
        services.session_mark_exited(session_id=session.pk)  # the next run's tmux server reuses its runtime id
        server.terminate()
        server.wait(timeout=10)
        subprocess.run(["tmux", "-S", str(root / "tmux.sock"), "kill-server"], check=False, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
        reset_instances()
    outputs: list[float] = []
    while not stream.empty():
        received, frame = stream.get()
        if frame.get("kind") == "output":
            marks = [float(m) for m in MARK.findall(frame["body"].get("data", ""))]
            outputs.extend((received - mark) * 1000 for mark in marks if mark >= started)
    held = max(quiet, provider.agent_state_debounce) * 1000
    p50, p95 = percentile(waits, 0.5), percentile(waits, 0.95)
    out50, out95 = percentile(outputs, 0.5), percentile(outputs, 0.95)
    verdict = "PASS" if p95 <= 2000 and p95 <= 2 * out95 + held else "MISS"
    print(
        f"board: waiting -> /ws/me/ over {len(waits)} trials p50 {p50:.0f} ms p95 {p95:.0f} ms; output -> stream "
        f"over {len(outputs)} lines p50 {out50:.0f} ms p95 {out95:.0f} ms; hold {held:.0f} ms; "
        f"target p95 <= 2000 ms and <= {2 * out95 + held:.0f} ms: {verdict}"
    )
    return [
        Row("board: waiting -> inbox on /ws/me/ p50", "pane output -> stream p50", out50, p50, "ms"),
        Row("board: waiting -> inbox on /ws/me/ p95", "pane output -> stream p95", out95, p95, "ms"),
        Row("board: same p95 beyond the hold", "pane output -> stream p95", out95, p95 - held, "ms"),
    ]


def _board_page(scope: Any, token: str) -> list[Row]:
    from django.test import Client

    from sessions_app.models import Session

    Session.objects.bulk_create(
        Session(
            tenant=scope.tenant,
            owner=scope.actor,
            title=f"fleet {i}",
            provider_instance="bench-fleet",
            runtime_id=uuid.uuid4().hex,
            agent_state=("working", "idle", "waiting_for_input")[i % 3],
        )
        for i in range(FLEET)
    )
    with connection.cursor() as cursor:  # as autovacuum would soon after such a load: plan with true row counts
        cursor.execute(f"ANALYZE {Session._meta.db_table}")
    browser = Client()
    browser.force_login(scope.actor)
    api = Client(headers={"Authorization": f"Bearer {token}"})
    assert browser.get("/board/").status_code == 200
    assert api.get("/api/v1/sessions/").status_code == 200
    board_us = per_op_us(lambda: browser.get("/board/"), 20)
    api_us = per_op_us(lambda: api.get("/api/v1/sessions/"), 20)
    return [
        Row(
            f"board: GET /board/ ({FLEET} sessions)",
            "GET /api/v1/sessions/ (one page)",
            api_us / 1000,
            board_us / 1000,
            "ms",
        )
    ]


def run() -> list[Row]:
    from tess_site.accounts import services as accounts
    from tess_site.accounts.selectors import roles_for
    from tess_site.scope import Channel, Role, Scope

    redis_url = settings.REDIS_URL or os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
    _use_redis_layer(redis_url)
    tenant = accounts.tenant_create(slug=f"bench-board-{uuid.uuid4().hex[:8]}")
    user, _ = accounts.user_ensure(username=f"bench-{tenant.slug}", password="bench-pass-1234")
    accounts.membership_grant(tenant=tenant, user=user, role=Role.OPERATOR)
    scope = Scope(
        tenant=tenant,
        actor=user,
        channel=Channel.CLI,
        correlation_id="bench-board",
        roles=roles_for(user=user, tenant=tenant),
    )
    token = accounts.token_issue(scope=scope, name="bench").plaintext
    rows = _waiting_to_inbox(scope, token, redis_url) if shutil.which("tmux") else []
    return rows + _board_page(scope, token)
