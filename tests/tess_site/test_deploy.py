"""deploy/: the systemd units and the environment template, checked by systemd and used for real.

The units are read the way systemd reads them (``Environment=`` defaults, the environment file over them,
``%d`` as the credentials directory), then the web and websocket units' own commands run against the test
database: the preflight passes, gunicorn serves ``/healthz`` and ``/metrics`` and daphne the websockets under
the production settings.
"""

from __future__ import annotations

import http.client
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.conftest import require_or_skip
from tests.tess_site.children import ROOT, VENV_BIN, Child, free_port, shared_database_url
from tests.waiting import wait_for

DEPLOY = ROOT / "deploy"
SYSTEMD = DEPLOY / "systemd"
UNITS = ["tess-web.service", "tess-turns.service", "tess-ws.service", "tess-worker.service", "tess-beat.service"]
REQUIRED_CREDENTIALS = {
    "secret_key": "SECRET_KEY_FILE",
    "database_url": "DATABASE_URL_FILE",
    "redis_url": "REDIS_URL_FILE",
    "gateway_signing_key": "TESS_GATEWAY_SIGNING_KEY_FILE",
}
SECRET_NAMES = [
    "SECRET_KEY",
    "DATABASE_URL",
    "REDIS_URL",
    "TESS_GATEWAY_SIGNING_KEY",
    "TESS_MODEL_API_KEY",
    "TESS_DISCORD_BOT_TOKEN",
    "TESS_MOS_WEBHOOK_SECRET",
]
HARDENING = {
    "NoNewPrivileges": "yes",
    "CapabilityBoundingSet": "",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    "SystemCallFilter": "@system-service",
    "User": "tess",
    "EnvironmentFile": "/etc/tess/tess.env",
}


def directives(path: Path) -> list[tuple[str, str]]:
    pairs = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            pairs.append((key, value))
    return pairs


def values(path: Path, key: str) -> list[str]:
    return [value for name, value in directives(path) if name == key]


def environment_of(unit: Path, env_file: Path, credentials: Path, *drop_ins: Path) -> dict[str, str]:
    """What systemd would give the unit's processes: Environment= lines, then the environment file over them."""
    env: dict[str, str] = {}
    for path in (unit, *drop_ins):
        for line in values(path, "Environment"):
            for assignment in shlex.split(line):
                key, _, value = assignment.partition("=")
                env[key] = value.replace("%d", str(credentials))
    for key, value in directives(env_file):
        env[key] = value
    return env


@pytest.mark.parametrize("unit", UNITS)
def test_each_unit_is_hardened_runs_as_tess_and_reads_the_environment_file(unit):
    path = SYSTEMD / unit
    for key, expected in HARDENING.items():
        assert expected in values(path, key), (unit, key)
    assert any("tess_preflight" in command for command in values(path, "ExecStartPre"))
    assert values(path, "ReadWritePaths") == ["/var/lib/tess /run/tess"]


@pytest.mark.parametrize("unit", UNITS)
def test_each_unit_takes_every_required_secret_as_a_credential_file(unit):
    path = SYSTEMD / unit
    loaded = dict(value.split(":", 1) for value in values(path, "LoadCredential"))
    assert loaded == {name: f"/etc/tess/credentials/{name}" for name in REQUIRED_CREDENTIALS}
    env = " ".join(values(path, "Environment"))
    for name, variable in REQUIRED_CREDENTIALS.items():
        assert f"{variable}=%d/{name}" in env


@pytest.mark.parametrize("path", [*(SYSTEMD / unit for unit in UNITS), DEPLOY / "tess.env.example"], ids=str)
def test_no_secret_value_is_written_in_a_unit_or_the_template(path):
    for key, _ in directives(path):
        assert key not in SECRET_NAMES, (path.name, key)
        for assignment in shlex.split(_ if key == "Environment" else ""):
            assert assignment.partition("=")[0] not in SECRET_NAMES


def test_systemd_accepts_the_units_without_a_single_warning(tmp_path):
    if shutil.which("systemd-analyze") is None:
        require_or_skip("systemd-analyze is not installed: the units were not verified by systemd")
    # Verified where they would run from, with the checkout standing in for /opt/tess (binaries must exist).
    for unit in [*UNITS, "tess.target"]:
        (tmp_path / unit).write_text((SYSTEMD / unit).read_text().replace("/opt/tess", str(ROOT)))
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *(str(tmp_path / unit) for unit in [*UNITS, "tess.target"])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0 and result.stdout + result.stderr == "", result.stdout + result.stderr


def _credentials(directory: Path) -> Path:
    directory.mkdir()
    secrets = {
        "secret_key": "deploy-test-" + "".join(f"{chr(97 + i % 26)}{i % 10}" for i in range(30)),
        "database_url": shared_database_url(),
        "redis_url": settings.REDIS_URL or "redis://127.0.0.1:6379/15",
        "gateway_signing_key": "gateway-signing-key-for-the-deploy-test-0123",
        "model_api_key": "model-key-for-the-deploy-test",
        "discord_bot_token": "bot-token-for-the-deploy-test",
        "mos_webhook_secret": "mos-secret-for-the-deploy-test",
    }
    for name, secret in secrets.items():
        (directory / name).write_text(secret + "\n")
    return directory


def _unit_env(unit: str, tmp_path: Path, **overrides: str) -> dict[str, str]:
    drop_in = SYSTEMD / "tess-.service.d" / "optional-credentials.conf.example"
    env = environment_of(SYSTEMD / unit, DEPLOY / "tess.env.example", _credentials(tmp_path / "credentials"), drop_in)
    env.pop("PROMETHEUS_MULTIPROC_DIR")  # /run/tess/metrics belongs to the real service
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    return {**base, **env, "TESS_VAR_DIR": str(tmp_path / "var"), "DB_CONN_MAX_AGE": "0", **overrides}


def _command(line: str, env: dict[str, str]) -> list[str]:
    expanded = re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], line.replace("/opt/tess", str(ROOT)))
    return shlex.split(expanded)


def unit_command(unit: str, env: dict[str, str]) -> list[str]:
    """The unit's ExecStart as its process runs it: expanded, and at the unit's CPU priority (``Nice=``)."""
    (start,) = values(SYSTEMD / unit, "ExecStart")
    nice = values(SYSTEMD / unit, "Nice")
    return [*(["nice", "-n", nice[0]] if nice else []), *_command(start, env)]


def _get(port: int, path: str, **headers: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers={"Host": "tess.example.com", **headers})
        response = conn.getresponse()
        return response.status, response.read()
    except OSError:
        return 0, b""
    finally:
        conn.close()


# The optional-credentials example hands over a Discord bot token, so Discord is on: its two public values.
DISCORD = {"TESS_DISCORD_PUBLIC_KEY": "cd" * 32, "TESS_DISCORD_APPLICATION_ID": "123456789012345678"}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.redis  # production requires Redis
def test_the_web_unit_with_the_template_starts_under_production_settings_and_serves(
    tmp_path, start_child: Callable[..., Child]
):
    port = free_port()
    env = _unit_env("tess-web.service", tmp_path, TESS_BIND_PORT=str(port), **DISCORD)
    assert env["DJANGO_SETTINGS_MODULE"] == "tess_site.settings.prod"

    check = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "DEBUG"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert "System check identified no issues (0 silenced)." in check.stdout, (check.stdout + check.stderr)[-3000:]

    (preflight,) = values(SYSTEMD / "tess-web.service", "ExecStartPre")
    result = subprocess.run(
        _command(preflight, env), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == ["ok", "ok", "ok", "ok", "ok"]

    (start,) = values(SYSTEMD / "tess-web.service", "ExecStart")
    command = _command(start, env)
    assert Path(command[0]).resolve() == (VENV_BIN / "gunicorn").resolve()
    assert command[1:3] == ["-c", "python:tess_site.gunicorn_conf"]
    child = start_child("tess-web", command, env)

    assert wait_for(lambda: not child.alive() or _get(port, "/healthz")[0] == 200, timeout=30), child.output()
    status, body = _get(port, "/metrics")
    assert status == 200 and b"tess_approvals_pending" in body, child.output()
    assert _get(port, "/metrics", **{"X-Forwarded-For": "203.0.113.9"})[0] == 404
    # Everything else is sent to HTTPS, unless the proxy says the request came over it (X-Forwarded-Proto, from
    # a peer in TESS_TRUSTED_PROXIES). gunicorn's own scheme headers, which it would believe from the
    # loopback by default, claim nothing.
    assert _get(port, "/admin/login/")[0] == 301
    assert _get(port, "/admin/login/", **{"X-Forwarded-Proto": "https"})[0] == 200
    for header, value in {"X-Forwarded-Protocol": "ssl", "X-Forwarded-Ssl": "on"}.items():
        assert _get(port, "/admin/login/", **{header: value})[0] == 301, header
    # gunicorn's access log is Tess's: JSON lines of the tess.access logger.
    assert wait_for(lambda: '"logger": "tess.access"' in child.wrote(), timeout=10), child.output()
    access = [line for line in child.wrote().splitlines() if '"logger": "tess.access"' in line]
    assert any('"GET /admin/login/ HTTP/1.1\\" 301' in line for line in access), access[-3:]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.redis
def test_the_websocket_unit_with_the_template_starts_under_production_settings(
    tmp_path, start_child: Callable[..., Child], cast, token_for
):
    port = free_port()
    env = _unit_env("tess-ws.service", tmp_path, TESS_WS_BIND_PORT=str(port), **DISCORD)
    assert env["DJANGO_SETTINGS_MODULE"] == "tess_site.settings.prod"
    (start,) = values(SYSTEMD / "tess-ws.service", "ExecStart")
    command = _command(start, env)
    assert command[1:3] == ["-m", "tess_site.asgi_server"]
    child = start_child("tess-ws", command, env)
    headers = {"X-Forwarded-Proto": "https"}
    assert wait_for(lambda: not child.alive() or _get(port, "/healthz", **headers)[0] == 200, timeout=30)
    url = f"ws://127.0.0.1:{port}/ws/me/"
    with pytest.raises(InvalidStatus) as refused:  # no credential
        connect(url, proxy=None, open_timeout=15)
    assert refused.value.response.status_code == 403
    bearer = {"Authorization": f"Bearer {token_for(cast.owner)}"}
    with connect(url, additional_headers=bearer, proxy=None, open_timeout=15) as ws:
        assert ws.protocol.state.name == "OPEN"


def test_the_target_starts_every_unit():
    (wants,) = values(SYSTEMD / "tess.target", "Wants")
    assert sorted(wants.split()) == sorted(UNITS)


@pytest.mark.parametrize("unit", ["tess-worker.service", "tess-beat.service"])
def test_only_the_units_that_serve_requests_keep_a_connection_pool(unit, tmp_path):
    assert _unit_env(unit, tmp_path)["TESS_DB_POOL"] == "0"
    for serving in ("tess-web.service", "tess-turns.service", "tess-ws.service"):
        (tmp_path / serving).mkdir()
        assert "TESS_DB_POOL" not in _unit_env(serving, tmp_path / serving)


def test_nginx_closes_an_idle_upstream_connection_before_gunicorn_does():
    """Otherwise a request nginx sends on a kept connection just as gunicorn closes it fails with 502, and a
    POST is not sent again: every upstream nginx keeps connections to must time them out sooner."""
    from tess_site import gunicorn_conf

    conf = (ROOT / "deploy" / "nginx" / "tess.conf").read_text()
    upstreams = re.findall(r"upstream (\w+) \{(.*?)\}", conf, flags=re.S)
    kept = {name: body for name, body in upstreams if re.search(r"^\s*keepalive \d+;", body, flags=re.M)}
    assert set(kept) == {"tess_http", "tess_turns"}
    for name, body in kept.items():
        timeout = re.search(r"^\s*keepalive_timeout (\d+)s;", body, flags=re.M)
        assert timeout is not None, name
        assert int(timeout.group(1)) < gunicorn_conf.keepalive, name
