"""The production web tier in child processes, for suites that must hold under ``tess_site.settings.prod``.

It starts what a production machine runs in front of the workers: ``tess-web.service`` (gunicorn, HTTP) and
``tess-ws.service`` (daphne, websockets), each the way its unit does (environment and ExecStart, as in
``test_deploy``), behind real nginx running ``deploy/nginx/tess.conf`` rendered for free ports. A client uses
nginx on ``port``, which sends ``/ws/`` to daphne and the rest to gunicorn, as in production; a test that pins
Tess's own answer to what nginx would refuse by itself (a NUL in a path) uses gunicorn's ``http_port``. The
servers run with real Redis and the test database the calling process created, so rows and tokens the test
makes are theirs too (use ``django_db(transaction=True)``).

The rendered proxy terminates no TLS (the ``listen 443 ssl`` lines become a plain loopback port and the
certificate lines go); it tells Tess the request came over HTTPS, as the real one does behind TLS.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings as django_settings

from tests.conftest import require_or_skip
from tests.tess_site.children import ROOT, Child, free_port
from tests.tess_site.test_deploy import DEPLOY, SYSTEMD, _command, _unit_env, unit_command, values
from tests.waiting import wait_for

HOST = "tess.example.com"  # ALLOWED_HOSTS in deploy/tess.env.example
# Sent straight to a server (not through the proxy): the peer is loopback, a trusted proxy, saying HTTPS.
HEADERS = {"Host": HOST, "X-Forwarded-Proto": "https"}
# Limits high enough that a suite's many requests from one address measure the app, not the throttle.
UNTHROTTLED = {"TESS_TOKEN_RATE": "10000/min", "TESS_DISCORD_LINK_RATE": "10000/min", "TESS_APPROVAL_RATE": "10000/min"}
# The optional-credentials example hands over a Discord bot token, so Discord is on: its two public values.
DISCORD = {"TESS_DISCORD_PUBLIC_KEY": "cd" * 32, "TESS_DISCORD_APPLICATION_ID": "123456789012345678"}


def _runtimes() -> dict[str, str]:
    """Rows built by tests/factories.py sit on the instance "nowhere": the production units must know it offers
    terminate, or they refuse to ask an approver (as they should for an instance they do not know)."""
    return {"TESS_RUNTIME_PROVIDERS": json.dumps({"nowhere": django_settings.TESS_RUNTIME_PROVIDERS["nowhere"]})}


NGINX_CONF = DEPLOY / "nginx" / "tess.conf"


@dataclass(frozen=True)
class ProductionWeb:
    child: Child  # tess-web: gunicorn
    ws_child: Child  # tess-ws: daphne
    proxy: Child  # nginx
    port: int  # nginx: the one origin a client uses, for HTTP and websockets
    http_port: int  # gunicorn, directly (as Prometheus and the preflight reach it)
    ws_port: int  # daphne, directly
    credentials: Path  # the secrets the units were handed (LoadCredential=), one file each
    directory: Path
    turns_child: Child | None = None  # tess-turns: gunicorn, when started (else turns go to tess-web)
    turns_port: int | None = None

    def secret(self, name: str) -> str:
        return (self.credentials / name).read_text().strip()

    def log_lines(self) -> list[str]:
        """Every line every process of the tier wrote: both servers' journals and nginx's logs, whole."""
        children = [self.child, self.ws_child, self.proxy, *([self.turns_child] if self.turns_child else [])]
        logs = [*(child.log_path for child in children), *self.directory.glob("nginx/*.log")]
        for child in children:
            child.output()  # flushes
        return [line for path in logs if path.exists() for line in path.read_text(errors="replace").splitlines()]


def answers(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/healthz", headers=HEADERS)
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def _once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"deploy/nginx/tess.conf no longer has exactly one {old!r}"
    return text.replace(old, new)


def render_nginx(directory: Path, *, port: int, http_port: int, ws_port: int, turns_port: int | None = None) -> Path:
    """``deploy/nginx/tess.conf`` for this test: its ports, no TLS, logs and temporary files under ``directory``.
    Without a turn server (``turns_port``), turns go to gunicorn's ``http_port`` like every other request."""
    directory.mkdir(parents=True, exist_ok=True)
    conf = NGINX_CONF.read_text()
    conf = _once(conf, "server 127.0.0.1:8000;", f"server 127.0.0.1:{http_port};")
    conf = _once(conf, "server 127.0.0.1:8002;", f"server 127.0.0.1:{turns_port or http_port};")
    conf = _once(conf, "server 127.0.0.1:8001;", f"server 127.0.0.1:{ws_port};")
    conf = _once(conf, "    listen 443 ssl http2;\n", f"    listen 127.0.0.1:{port};\n")
    conf = _once(conf, "    listen 80;\n", f"    listen 127.0.0.1:{free_port()};\n")
    conf = re.sub(r"\n\s*listen \[::\]:\d+[^;]*;", "", conf)
    conf = re.sub(r"\n\s*ssl_certificate(_key)? [^;]+;", "", conf)
    conf = conf.replace("X-Forwarded-Proto $scheme", "X-Forwarded-Proto https")
    conf = conf.replace("/var/log/nginx/", f"{directory}/")
    conf = conf.replace("/opt/tess/", f"{ROOT}/")
    (directory / "tess.conf").write_text(conf)
    temp = directory / "temp"
    temp.mkdir(exist_ok=True)
    main = [
        "daemon off;",
        "worker_processes 1;",
        *(["user root;"] if os.geteuid() == 0 else []),  # workers must reach the test's own files
        f"pid {directory}/nginx.pid;",
        f"error_log {directory}/error.log warn;",
        "events { worker_connections 256; }",
        "http {",
        "    include /etc/nginx/mime.types;",
        *(f"    {kind}_temp_path {temp}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")),
        f"    include {directory}/tess.conf;",
        "}",
    ]
    (directory / "nginx.conf").write_text("\n".join(main) + "\n")
    return directory / "nginx.conf"


def _nginx() -> str:
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)
    if found is None:
        require_or_skip("NGINX IS NOT INSTALLED: the production tier runs behind deploy/nginx/tess.conf")
    assert found is not None
    return found


def start_production_web(
    start_child: Callable[..., Child], directory: Path, *, turns: bool = False, **overrides: str
) -> ProductionWeb:
    """The tier behind nginx; with ``turns``, the turn server (tess-turns.service) too, which nginx sends turns
    to (without it they go to tess-web, which serves them as well)."""
    nginx = _nginx()
    port, http_port, ws_port = free_port(), free_port(), free_port()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ws").mkdir(exist_ok=True)
    # One machine: both units share the state directory (StateDirectory=tess).
    settings = {**DISCORD, **UNTHROTTLED, **_runtimes(), "TESS_VAR_DIR": str(directory / "var"), **overrides}
    web_env = _unit_env("tess-web.service", directory, TESS_BIND_PORT=str(http_port), **settings)
    ws_env = _unit_env("tess-ws.service", directory / "ws", TESS_WS_BIND_PORT=str(ws_port), **settings)
    for env in (web_env, ws_env):
        assert env["DJANGO_SETTINGS_MODULE"] == "tess_site.settings.prod"
    (web_start,) = values(SYSTEMD / "tess-web.service", "ExecStart")
    (ws_start,) = values(SYSTEMD / "tess-ws.service", "ExecStart")
    web = start_child("tess-web", _command(web_start, web_env), web_env)
    ws = start_child("tess-ws", _command(ws_start, ws_env), ws_env)
    turns_child, turns_port = None, None
    if turns:
        turns_port = free_port()
        (directory / "turns").mkdir(exist_ok=True)
        turns_env = _unit_env(
            "tess-turns.service", directory / "turns", TESS_TURNS_BIND_PORT=str(turns_port), **settings
        )
        turns_child = start_child("tess-turns", unit_command("tess-turns.service", turns_env), turns_env)
    _wait_until_it_answers(web, http_port, 60)
    _wait_until_it_answers(ws, ws_port, 60)
    if turns_child is not None and turns_port is not None:
        _wait_until_it_answers(turns_child, turns_port, 60)
    conf = render_nginx(directory / "nginx", port=port, http_port=http_port, ws_port=ws_port, turns_port=turns_port)
    proxy = start_child("nginx", [nginx, "-p", str(directory / "nginx"), "-c", str(conf), "-e", "stderr"], {})
    _wait_until_it_answers(proxy, port, 30)
    return ProductionWeb(
        web, ws, proxy, port, http_port, ws_port, directory / "credentials", directory, turns_child, turns_port
    )


def _wait_until_it_answers(child: Child, port: int, timeout: float) -> None:
    assert wait_for(lambda: not child.alive() or answers(port), timeout=timeout), child.output()
    assert child.alive(), child.output()


def start_production_worker(start_child: Callable[..., Child], directory: Path, **overrides: str) -> Child:
    """The worker unit (one process), so what production delegates to Celery runs, and health finds a worker."""
    directory.mkdir(parents=True, exist_ok=True)
    env = _unit_env(
        "tess-worker.service", directory, TESS_WORKER_CONCURRENCY="1", **{**DISCORD, **_runtimes(), **overrides}
    )
    (start,) = values(SYSTEMD / "tess-worker.service", "ExecStart")
    start = start.replace("%H", socket.gethostname())  # systemd's specifier for the host name
    child = start_child("tess-worker", _command(start, env), env)
    assert wait_for(lambda: not child.alive() or " ready." in child.wrote(), timeout=60), child.output()
    assert child.alive(), child.output()
    return child
