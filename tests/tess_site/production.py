"""The production web unit in a child process, for suites that must hold under ``tess_site.settings.prod``.

It starts the way ``deploy/systemd/tess-web.service`` does (its environment and ExecStart, as in
``test_deploy``), with real Redis and the test database the calling process created, so rows and tokens the
test makes are the child's too (use ``django_db(transaction=True)``). Production redirects plain HTTP, so
every request says it came through the proxy over HTTPS (``HEADERS``); the peer is loopback, a trusted proxy.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.tess_site.children import Child, free_port
from tests.tess_site.test_deploy import SYSTEMD, _command, _unit_env, values
from tests.waiting import wait_for

HOST = "tess.example.com"  # ALLOWED_HOSTS in deploy/tess.env.example
HEADERS = {"Host": HOST, "X-Forwarded-Proto": "https"}
# Limits high enough that a suite's many requests from one address measure the app, not the throttle.
UNTHROTTLED = {"TESS_TOKEN_RATE": "10000/min", "TESS_DISCORD_LINK_RATE": "10000/min", "TESS_APPROVAL_RATE": "10000/min"}
# The optional-credentials example hands over a Discord bot token, so Discord is on: its two public values.
DISCORD = {"TESS_DISCORD_PUBLIC_KEY": "cd" * 32, "TESS_DISCORD_APPLICATION_ID": "123456789012345678"}


@dataclass(frozen=True)
class ProductionWeb:
    child: Child
    port: int
    credentials: Path  # the secrets the unit was handed (LoadCredential=), one file each

    def secret(self, name: str) -> str:
        return (self.credentials / name).read_text().strip()


def answers(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/healthz", headers=HEADERS)
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def start_production_web(start_child: Callable[..., Child], directory: Path, **overrides: str) -> ProductionWeb:
    port = free_port()
    directory.mkdir(parents=True, exist_ok=True)
    env = _unit_env("tess-web.service", directory, TESS_BIND_PORT=str(port), **{**DISCORD, **UNTHROTTLED, **overrides})
    assert env["DJANGO_SETTINGS_MODULE"] == "tess_site.settings.prod"
    (start,) = values(SYSTEMD / "tess-web.service", "ExecStart")
    child = start_child("tess-web", _command(start, env), env)
    assert wait_for(lambda: not child.alive() or answers(port), timeout=60) and child.alive(), child.output()
    return ProductionWeb(child, port, directory / "credentials")


def start_production_worker(start_child: Callable[..., Child], directory: Path, **overrides: str) -> Child:
    """The worker unit (one process), so what production delegates to Celery runs, and health finds a worker."""
    directory.mkdir(parents=True, exist_ok=True)
    env = _unit_env("tess-worker.service", directory, TESS_WORKER_CONCURRENCY="1", **{**DISCORD, **overrides})
    (start,) = values(SYSTEMD / "tess-worker.service", "ExecStart")
    start = start.replace("%H", socket.gethostname())  # systemd's specifier for the host name
    child = start_child("tess-worker", _command(start, env), env)
    assert wait_for(lambda: not child.alive() or " ready." in child.output(), timeout=60), child.output()
    assert child.alive(), child.output()
    return child
