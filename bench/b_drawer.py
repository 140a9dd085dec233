"""Drawer ready: how long the Tess drawer takes to show a session whose stream holds 100,000 events, beside the
same for a session of 10 events, in the same run.

Real Chromium (``/usr/bin/chromium``, driven by Playwright) loads ``/admin/`` from a real daphne serving Tess
(channels-redis) with the drawer open on the session, as a reload does. Both sessions are real tmux sessions
whose pane shows a screen, and carry three pending cards; their streams hold that pane's earlier output, one
line per event. Ready is the moment the page shows all three: the session's status, its cards, and the last
screen of output drawn in the terminal (the pane's screen, read by ``…/screen/``, after the tail of the
stream), measured by the page's own clock from the start of navigation. Trials alternate between the two
sessions (``BENCH_DRAWER_TRIALS`` each, 20 by default, after two unmeasured loads of each). Target: the
100,000-event session's p50 and p95 at most 1.5x the 10-event one's, and under one second.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings

from bench.b_streams import _free_port, _start_server, _use_redis_layer
from bench.common import Row, percentile

TRIALS = int(os.environ.get("BENCH_DRAWER_TRIALS", "20"))
BIG = int(os.environ.get("BENCH_DRAWER_EVENTS", "100000"))
SMALL = 10
CHROMIUM = os.environ.get("TESS_CHROMIUM", "/usr/bin/chromium")
BATCH = 5000

# True (with the page's clock, ms since navigation started) once status, cards and the screen are shown.
READY = """(marker) => {
  const output = document.getElementById("tess-output");
  const badge = document.querySelector("#tess-session-state .tess-status-badge");
  const cards = document.querySelectorAll("#tess-cards .tess-card-memory").length;
  const terminal = window.Tess && window.Tess.terminal;
  if (!output || !output.dataset.ready || !badge || cards < 3 || !terminal) return false;
  const buffer = terminal.buffer.active;
  for (let y = 0; y < terminal.rows; y++) {
    const line = buffer.getLine(buffer.baseY + y);
    if (line && line.translateToString(true).includes(marker)) return performance.now();
  }
  return false;
}"""


def _sessions(scope: Any, root: Path) -> dict[str, Any]:
    """Two tmux sessions of the same shape, one with ``SMALL`` events, one with ``BIG``; three cards each."""
    from memory_app.services import memory_propose
    from providers_app.registry import get_provider, reset_instances
    from providers_app.tmux import TmuxProvider
    from sessions_app import journal, services, stream

    config = {"kind": "tmux", "socket": str(root / "tmux.sock"), "log_dir": str(root / "logs"), "command": ["sh"]}
    settings.TESS_RUNTIME_PROVIDERS = {"bench-drawer": config}
    os.environ["TESS_RUNTIME_PROVIDERS"] = json.dumps(settings.TESS_RUNTIME_PROVIDERS)  # and the server's
    reset_instances()
    provider = get_provider("bench-drawer")
    assert isinstance(provider, TmuxProvider)
    made = {}
    for name, count in (("small", SMALL), ("big", BIG)):
        marker = f"screen of the {name} session"
        draw = f"printf '\\033[2J\\033[1;1Hbench {name}\\033[12;5H\\033[32m{marker}\\033[0m'; sleep 3600"
        runtime = provider.start_command(scope, title=name, argv=["sh", "-c", draw])
        session = services.session_bind_started(scope=scope, owner=scope.actor, runtime=runtime, title=name)
        pane = provider.get_session_tree(scope, session.runtime_ref)[0].children[0].children[0].id
        for start in range(0, count, BATCH):
            items = [
                (
                    stream.EventKind.OUTPUT,
                    stream.output_body(
                        data=f"{name} line {n}: earlier output of the pane\r\n",
                        source=pane,
                        cursor=f"{pane}:0",
                        next_cursor=f"{pane}:0",  # before the screen: the terminal's scrollback
                    ),
                )
                for n in range(start + 1, min(count, start + BATCH) + 1)
            ]
            journal.events_append(session_id=session.pk, items=items)
        card_scope = dataclasses.replace(scope, session=str(session.pk))
        for i in range(3):
            memory_propose(card_scope, data={"op": "remember", "category": "preferences", "value": f"{name} {i}"})
        made[name] = (session, marker)
    return made


def _trials(port: int, username: str, password: str, made: dict[str, Any]) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    times: dict[str, list[float]] = {name: [] for name in made}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            context = browser.new_context(base_url=f"http://127.0.0.1:{port}", viewport={"width": 1366, "height": 900})
            page = context.new_page()
            page.goto("/admin/login/?next=/admin/")
            page.fill("#id_username", username)
            page.fill("#id_password", password)
            page.click("input[type=submit]")
            page.wait_for_url("**/admin/")
            for trial in range(TRIALS + 2):
                for name, (session, marker) in made.items():
                    page.evaluate(
                        "id => { localStorage.setItem('tess.drawer.open', '1');"
                        " localStorage.setItem('tess.drawer.session', id); }",
                        str(session.pk),
                    )
                    page.goto("/admin/", wait_until="commit")
                    ready = page.wait_for_function(READY, arg=marker, polling="raf", timeout=30_000).json_value()
                    if trial >= 2:  # the first loads warm the server's and the browser's caches
                        times[name].append(float(ready))
        finally:
            browser.close()
    return times


def run() -> list[Row]:
    if not shutil.which("tmux") or not Path(CHROMIUM).exists():
        print("drawer: SKIPPED (needs tmux and Chromium)")
        return []
    from tess_site.accounts import services as accounts
    from tess_site.accounts.selectors import roles_for
    from tess_site.scope import Channel, Role, Scope

    redis_url = settings.REDIS_URL or os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
    _use_redis_layer(redis_url)
    tenant = accounts.tenant_create(slug=f"bench-drawer-{uuid.uuid4().hex[:8]}")
    password = "bench-pass-1234"
    user, _ = accounts.user_ensure(username=f"bench-{tenant.slug}", password=password)
    user.is_staff = True  # the admin, where the drawer lives
    user.save(update_fields=["is_staff"])
    accounts.membership_grant(tenant=tenant, user=user, role=Role.OPERATOR)
    scope = Scope(
        tenant=tenant,
        actor=user,
        channel=Channel.WEB,
        correlation_id="bench-drawer",
        roles=roles_for(user=user, tenant=tenant),
    )
    root = Path(tempfile.mkdtemp(prefix="tess-bench-drawer-", dir="/tmp"))
    server = None
    made: dict[str, Any] = {}
    try:
        made = _sessions(scope, root)
        port = _free_port()
        server = _start_server(port, redis_url)
        times = _trials(port, user.username, password, made)
    finally:
        from providers_app.registry import reset_instances
        from sessions_app import services

        for session, _marker in made.values():
            services.session_mark_exited(session_id=session.pk)
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        subprocess.run(["tmux", "-S", str(root / "tmux.sock"), "kill-server"], check=False, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
        os.environ.pop("TESS_RUNTIME_PROVIDERS", None)
        reset_instances()
    small, big = times["small"], times["big"]
    s50, s95, b50, b95 = percentile(small, 0.5), percentile(small, 0.95), percentile(big, 0.5), percentile(big, 0.95)
    print(
        f"drawer: ready over {len(big)} trials each: {BIG:,} events p50 {b50:.0f} ms p95 {b95:.0f} ms; "
        f"{SMALL} events p50 {s50:.0f} ms p95 {s95:.0f} ms; ratio p50 {b50 / s50:.2f}x p95 {b95 / s95:.2f}x; "
        f"target <= 1.5x and < 1000 ms: {'PASS' if max(b50 / s50, b95 / s95) <= 1.5 and b95 < 1000 else 'MISS'}"
    )
    return [
        Row(f"drawer ready, {BIG:,} events p50", f"drawer ready, {SMALL} events p50", s50, b50, "ms", at_most=1.5),
        Row(f"drawer ready, {BIG:,} events p95", f"drawer ready, {SMALL} events p95", s95, b95, "ms", at_most=1.5),
    ]
