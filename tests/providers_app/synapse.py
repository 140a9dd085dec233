"""A real Synapse homeserver for the Matrix provider's tests: one per test session, on 127.0.0.1 only.

Synapse lives in its own virtual environment (``scripts/synapse-venv.sh`` installs it in
``var/synapse-venv``; ``SYNAPSE_VENV`` overrides), so its pins never meet Tess's. The fixture writes a
configuration with ``--generate-config`` (signing key, log config) and then a second file that overrides
what matters here (Synapse merges the files given with ``-c`` in order): one client listener on a free
local port, no federation listener and no federation peers, no trusted key servers, no URL previews, no
stats reporting, SQLite, and rate limits lifted. Nothing in it reaches the internet.

Users are registered with the shared secret through the admin API: ``GET`` a nonce, then ``POST`` the
nonce, name, password and an HMAC-SHA1 over them keyed by ``registration_shared_secret`` (Synapse docs,
"Shared-Secret Registration", admin_api/register_api).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
SERVER_NAME = "tess.test"
START_SECONDS = 90.0
LIFTED = {"per_second": 10000, "burst_count": 100000}


@dataclass(frozen=True)
class MatrixUser:
    user_id: str
    access_token: str


def synapse_python() -> Path:
    venv = Path(os.environ.get("SYNAPSE_VENV") or REPO / "var" / "synapse-venv")
    python = venv / "bin" / "python"
    if not python.exists():
        pytest.fail(f"Synapse is not installed in {venv}: run scripts/synapse-venv.sh (make test does).")
    return python


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def overrides(directory: Path, port: int, shared_secret: str) -> str:
    """The settings that matter for the tests, as YAML (JSON is YAML)."""
    import json

    config: dict[str, Any] = {
        "server_name": SERVER_NAME,
        "pid_file": str(directory / "homeserver.pid"),
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": {"name": "sqlite3", "args": {"database": str(directory / "homeserver.db")}},
        "media_store_path": str(directory / "media"),
        "registration_shared_secret": shared_secret,
        "enable_registration": False,
        "report_stats": False,
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],
        "url_preview_enabled": False,
        "enable_metrics": False,
        "presence": {"enabled": False},
        "rc_message": LIFTED,
        "rc_registration": LIFTED,
        "rc_login": {"address": LIFTED, "account": LIFTED, "failed_attempts": LIFTED},
        "rc_joins": {"local": LIFTED, "remote": LIFTED},
        "rc_joins_per_room": LIFTED,
        "rc_invites": {"per_room": LIFTED, "per_user": LIFTED, "per_issuer": LIFTED},
        "rc_room_creation": LIFTED,
        "rc_admin_redaction": LIFTED,
    }
    return json.dumps(config, indent=1)


class Synapse:
    """A running homeserver: its URL, a way to register users, and its log for failure messages."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.shared_secret = secrets.token_hex(16)
        self.log = directory / "synapse.out"
        self.process: subprocess.Popen[bytes] | None = None
        self._names = itertools.count(1)

    def start(self) -> None:
        python = synapse_python()
        base = self.directory / "homeserver.yaml"
        subprocess.run(
            [
                str(python),
                *("-m", "synapse.app.homeserver", "--generate-config", "--report-stats=no"),
                *("--server-name", SERVER_NAME, "--config-path", str(base)),
                *("--data-directory", str(self.directory)),
            ],
            cwd=self.directory,
            check=True,
            capture_output=True,
            timeout=120,
        )
        extra = self.directory / "tests.yaml"
        extra.write_text(overrides(self.directory, self.port, self.shared_secret))
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [str(python), "-m", "synapse.app.homeserver", "-c", str(base), "-c", str(extra)],
                cwd=self.directory,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"Synapse exited at start-up:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"Synapse did not become healthy in {START_SECONDS} seconds:\n{self.log_tail()}")

    def log_tail(self) -> str:
        """The end of Synapse's own log (``homeserver.log``) and of what it printed."""
        tails = []
        for path in (self.directory / "homeserver.log", self.log):
            if path.exists():
                tails.append("\n".join(path.read_text(errors="replace").splitlines()[-30:]))
        return "\n".join(tails)

    def register(self, prefix: str = "user") -> MatrixUser:
        """A new user with a unique name; the access token the registration returned."""
        username = f"{prefix.lower()}-{next(self._names)}-{secrets.token_hex(3)}"
        password = secrets.token_hex(12)
        nonce = httpx.get(f"{self.url}/_synapse/admin/v1/register", timeout=10).json()["nonce"]
        mac = hmac.new(self.shared_secret.encode(), digestmod=hashlib.sha1)
        mac.update(b"\x00".join([nonce.encode(), username.encode(), password.encode(), b"notadmin"]))
        response = httpx.post(
            f"{self.url}/_synapse/admin/v1/register",
            json={"nonce": nonce, "username": username, "password": password, "admin": False, "mac": mac.hexdigest()},
            timeout=30,
        )
        response.raise_for_status()
        body = response.json()
        return MatrixUser(user_id=body["user_id"], access_token=body["access_token"])

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    """One homeserver for the whole test session (each test registers fresh users, so none share rooms)."""
    server = Synapse(tmp_path_factory.mktemp("synapse"))
    try:
        server.start()
        yield server
    finally:
        server.stop()
