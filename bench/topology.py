"""The production web tier for the benchmarks: gunicorn and daphne from their units, behind real nginx.

Each node is what a production machine serves with, ``tess-web.service`` (gunicorn), ``tess-turns.service``
(the same gunicorn for turns, at its lower CPU priority) and ``tess-ws.service`` (daphne), started the way their
units start them under ``tess_site.settings.prod`` (the suite's ``tests/tess_site/production.py`` reads the
units; this reuses it). One nginx, ``deploy/nginx/tess.conf`` rendered for free ports, sends ``/ws/`` to every
node's daphne, turns to every node's turn server and the rest to every node's gunicorn (its upstreams list all
nodes, as a proxy in front of several machines would). Clients use ``url``, the one origin.
``BENCH_TURNS_NICE`` runs the turn servers at another priority than their unit's, to compare.

The servers use this run's database and Redis (the credential files the units are handed name them). Beside the
units' own defaults the benchmarks change only what a benchmark needs: ``ALLOWED_HOSTS`` also takes the
loopback address the clients send as ``Host``, the per-token throttles are lifted (one token makes thousands of
requests), and what each benchmark passes (the model adapter, gunicorn's threads).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import connection, connections

from tests.tess_site.children import Child, free_port
from tests.tess_site.production import (
    DISCORD,
    HOST,
    SYSTEMD,
    UNTHROTTLED,
    _command,
    _nginx,
    _unit_env,
    _wait_until_it_answers,
    render_nginx,
    values,
)
from tests.tess_site.test_deploy import unit_command

UNLIMITED = {key: "1000000/min" for key in UNTHROTTLED}


@dataclass
class Node:
    web: Child  # gunicorn
    ws: Child  # daphne
    http_port: int
    ws_port: int
    turns: Child  # gunicorn, the turn server
    turns_port: int


@dataclass
class Production:
    directory: Path
    port: int  # nginx
    settings: dict[str, str]
    nodes: list[Node] = field(default_factory=list)
    proxy: Child | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def children(self) -> list[Child]:
        servers = [c for node in self.nodes for c in (node.web, node.turns, node.ws)]
        return servers + ([self.proxy] if self.proxy else [])

    @property
    def pool_capacity(self) -> int:
        """The most PostgreSQL connections the serving processes' pools may hold: (2 gunicorns' workers + daphne)
        x max, per node."""
        from tess_site import gunicorn_conf
        from tess_site.settings.derived import POOL_MAX_DEFAULT

        workers = int(self.settings.get("TESS_WEB_WORKERS", gunicorn_conf.workers))
        pool_max = int(self.settings.get("TESS_DB_POOL_MAX", POOL_MAX_DEFAULT))
        return len(self.nodes) * (2 * workers + 1) * pool_max

    def stop(self) -> None:
        for child in reversed(self.children()):
            child.stop()


def start_production(directory: Path, *, nodes: int = 1, **overrides: str) -> Production:
    """``nodes`` machines of gunicorn (tess-web, tess-turns) and daphne from the units, behind one nginx; stop it
    with ``stop()``."""
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        raise RuntimeError("the benchmarks on the production tier need nginx (deploy/nginx/tess.conf runs in front)")
    directory.mkdir(parents=True, exist_ok=True)
    settings = {**DISCORD, **UNLIMITED, "ALLOWED_HOSTS": f"{HOST},127.0.0.1", **overrides}
    production = Production(directory=directory, port=free_port(), settings=settings)
    (web_start,) = values(SYSTEMD / "tess-web.service", "ExecStart")
    (ws_start,) = values(SYSTEMD / "tess-ws.service", "ExecStart")
    try:
        for i in range(nodes):
            home = directory / f"node{i}"
            (home / "ws").mkdir(parents=True, exist_ok=True)
            (home / "turns").mkdir(parents=True, exist_ok=True)
            http_port, ws_port, turns_port = free_port(), free_port(), free_port()
            node_settings = {"TESS_VAR_DIR": str(home / "var"), **settings}
            web_env = _unit_env("tess-web.service", home, TESS_BIND_PORT=str(http_port), **node_settings)
            ws_env = _unit_env("tess-ws.service", home / "ws", TESS_WS_BIND_PORT=str(ws_port), **node_settings)
            turns_env = _unit_env(
                "tess-turns.service", home / "turns", TESS_TURNS_BIND_PORT=str(turns_port), **node_settings
            )
            web = Child(_command(web_start, web_env), web_env, home / "tess-web.log")
            ws = Child(_command(ws_start, ws_env), ws_env, home / "tess-ws.log")
            command = unit_command("tess-turns.service", turns_env)
            if os.environ.get("BENCH_TURNS_NICE") and command[0] == "nice":
                command[2] = os.environ["BENCH_TURNS_NICE"]
            turns = Child(command, turns_env, home / "tess-turns.log")
            production.nodes.append(Node(web, ws, http_port, ws_port, turns, turns_port))
        for node in production.nodes:
            _wait_until_it_answers(node.web, node.http_port, 120)
            _wait_until_it_answers(node.ws, node.ws_port, 120)
            _wait_until_it_answers(node.turns, node.turns_port, 120)
        first = production.nodes[0]
        conf = render_nginx(
            directory / "nginx",
            port=production.port,
            http_port=first.http_port,
            ws_port=first.ws_port,
            turns_port=first.turns_port,
        )
        site = conf.parent / "tess.conf"
        text = site.read_text()
        for kind in ("http", "ws", "turns"):
            servers = "\n".join(f"    server 127.0.0.1:{getattr(n, f'{kind}_port')};" for n in production.nodes)
            old = f"    server 127.0.0.1:{getattr(first, f'{kind}_port')};"
            text = text.replace(old, servers, 1)
        site.write_text(text)
        args = [_nginx(), "-p", str(conf.parent), "-c", str(conf), "-e", "stderr"]
        production.proxy = Child(args, {}, directory / "nginx.log")
        _wait_until_it_answers(production.proxy, production.port, 30)
    except BaseException:
        production.stop()
        raise
    return production


class BackendSampler:
    """The client backends on this database while it runs, sampled as fast as PostgreSQL answers.

    This process's own connections (the caller's and the sampler's) are left out, so what is counted is the
    servers'. ``most`` is the most backends at once, ``most_busy`` the most not idle (running a statement or
    inside a transaction) at once, ``autovacuum`` the samples that saw an autovacuum worker at work (in any
    database: it takes CPU and disk from the servers all the same).
    """

    def __init__(self) -> None:
        self.most = 0
        self.most_busy = 0
        self.samples = 0
        self.autovacuum = 0
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self._own = {int(cursor.fetchone()[0])}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        db = connections["default"]
        try:
            while not self._stop.is_set():
                with db.cursor() as cursor:
                    cursor.execute(
                        "SELECT pid, state, backend_type FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND"
                        " (backend_type = 'autovacuum worker'"
                        " OR (backend_type = 'client backend' AND datname = current_database()))"
                    )
                    found = cursor.fetchall()
                rows = [
                    (int(pid), state)
                    for pid, state, kind in found
                    if kind == "client backend" and int(pid) not in self._own
                ]
                self.samples += 1
                self.autovacuum += any(kind == "autovacuum worker" for _, _, kind in found)
                self.most = max(self.most, len(rows))
                self.most_busy = max(self.most_busy, sum(1 for _, state in rows if state != "idle"))
                self._stop.wait(0.02)
        finally:
            db.close()

    def __enter__(self) -> BackendSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def database_settled(timeout: float = 120.0) -> float:
    """Wait until no autovacuum worker has been at work for a second, then write a checkpoint; the seconds waited.

    A benchmark that follows one which wrote thousands of rows would otherwise measure PostgreSQL catching up
    with them (vacuuming those tables, writing their pages out) in some of its windows and not in others.
    """
    started = time.monotonic()
    quiet_since = started
    with connection.cursor() as cursor:
        while time.monotonic() - started < timeout:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")
            if cursor.fetchone()[0]:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= 1.0:
                break
            time.sleep(0.1)
        cursor.execute("CHECKPOINT")
    return time.monotonic() - started


def bench_operator(label: str, *, sessions: int, notes: int = 0) -> tuple[str, list[str]]:
    """An operator of a tenant of its own with ``sessions`` sessions and ``notes`` confirmed memory notes.

    Returns a personal token and the session ids.
    """
    from bench.b_turns import _remember
    from sessions_app.models import Session
    from tess_site.accounts import services as accounts
    from tess_site.accounts.selectors import roles_for
    from tess_site.scope import Channel, Role, Scope

    tenant = accounts.tenant_create(slug=f"bench-{label}-{uuid.uuid4().hex[:8]}")
    user, _ = accounts.user_ensure(username=f"bench-{tenant.slug}", password="bench-pass-1234")
    accounts.membership_grant(tenant=tenant, user=user, role=Role.OPERATOR)
    roles = roles_for(user=user, tenant=tenant)
    scope = Scope(tenant=tenant, actor=user, channel=Channel.CLI, correlation_id=f"bench-{label}", roles=roles)
    if notes:
        _remember(scope, {"op": "remember", "category": "standing_initiative", "value": "EVE_EVERYWHERE Phase 5"})
    for i in range(notes - 1):
        _remember(scope, {"op": "remember", "category": "preferences", "value": f"bench preference number {i}"})
    token = accounts.token_issue(scope=scope, name="bench").plaintext
    ids = [
        str(
            Session.objects.create(
                tenant=tenant, owner=user, title=f"{label} {i}", provider_instance="bench", runtime_id=uuid.uuid4().hex
            ).pk
        )
        for i in range(sessions)
    ]
    return token, ids


@contextmanager
def production_tier(label: str, **kwargs: Any) -> Iterator[Production]:
    """``start_production`` in a directory of its own, stopped after; on failure the servers' last lines are shown."""
    directory = Path(tempfile.mkdtemp(prefix=f"tess-bench-{label}-"))
    production: Production | None = None
    try:
        production = start_production(directory, **kwargs)
        yield production
    except BaseException:
        for log in sorted(directory.rglob("*.log")):
            print(f"--- {log}:\n{log.read_text(errors='replace')[-2000:]}", file=sys.stderr)
        raise
    finally:
        if production is not None:
            production.stop()
    shutil.rmtree(directory, ignore_errors=True)
