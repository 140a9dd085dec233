"""The ``tess`` CLI as a subprocess against the real ASGI app served by daphne in a child process.

Daphne shares the test database, so these tests commit (``transaction=True``); the CLI's config lives in
a per-test ``XDG_CONFIG_HOME``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.tess_site.children import ROOT, VENV_BIN, Child, child_env, free_port, serves_healthz
from tests.tess_site.conftest import start_child  # noqa: F401  (module-scoped child processes)
from tests.waiting import wait_for


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Live:
    port: int
    child: Child

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def start_daphne(start: Callable[..., Child], port: int) -> Child:
    child = start(
        "daphne",
        [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"],
        child_env(TESS_STREAM_HEARTBEAT_SECONDS="1", TESS_STREAM_RECHECK_SECONDS="1"),
    )
    if not wait_for(lambda: not child.alive() or serves_healthz(port), timeout=30) or not child.alive():
        pytest.fail(f"daphne did not answer on port {port}:\n{child.output()}")
    return child


@pytest.fixture(scope="module")
def live(django_db_setup: None, start_child: Callable[..., Child]) -> Live:  # noqa: F811
    port = free_port()
    return Live(port=port, child=start_daphne(start_child, port))


@dataclass
class Tess:
    """Runs ``tess`` (``python -m tess_cli.main``, what the console script calls) with its own config dir."""

    home: Path
    url: str

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TESS_", "DJANGO_"))}
        env.update({"XDG_CONFIG_HOME": str(self.home), "TESS_URL": self.url, "PYTHONUNBUFFERED": "1", **extra})
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "tess_cli.main", *args]

    def __call__(self, *args: str, stdin: str = "", **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args), input=stdin, capture_output=True, text=True, cwd=ROOT, env=self.env(**extra), timeout=60
        )

    def popen(self, *args: str, **extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=self.env(**extra),
            # A suite started in the background of a non-interactive shell inherits SIGINT as ignored, and
            # Python then never turns Ctrl-C into KeyboardInterrupt; the CLI is tested as a terminal runs it.
            preexec_fn=_default_sigint,
        )

    def login(self, username: str) -> None:
        done = self("login", "--username", username, "--password-stdin", stdin=f"{username}-pass-1234\n")
        assert done.returncode == 0, done.stderr


@pytest.fixture
def tess(tmp_path: Path, live: Live) -> Iterator[Tess]:
    yield Tess(home=tmp_path / "config", url=live.url)
