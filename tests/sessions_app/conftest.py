"""Fixtures for the sessions app: real tmux servers on private sockets, and sessions bound to them.

Every tmux instance lives in its own temporary directory with its own socket; its server is killed at
teardown. The runtime command reads lines and answers ``got:<line>``, so a delivered message is visible
in the output exactly as often as it was delivered (the pane's echo of typed keys has no ``got:``).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from providers_app.registry import reset_instances
from sessions_app import services
from sessions_app.models import Session
from tests.conftest import Cast, require_or_skip, scope_of
from tests.tess_site.conftest import start_child  # noqa: F401  (the module-scoped child-process fixture)
from tests.waiting import wait_for

ECHO_COMMAND = 'while IFS= read -r line; do echo "got:$line"; done'


@dataclass(frozen=True)
class TmuxInstance:
    name: str
    socket: Path
    log_dir: Path

    def config(self, **extra: Any) -> dict[str, Any]:
        return {
            "kind": "tmux",
            "socket": str(self.socket),
            "log_dir": str(self.log_dir),
            "command": ["sh", "-c", ECHO_COMMAND],
            "refresh_seconds": 0.2,
            **extra,
        }

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, check=False, timeout=10
        ).stdout


def make_instance(name: str) -> TmuxInstance:
    # Socket paths must stay short (108 bytes), so not under pytest's deep tmp_path.
    root = Path(tempfile.mkdtemp(prefix=f"tess-{name}-", dir="/tmp"))
    return TmuxInstance(name=name, socket=root / "tmux.sock", log_dir=root / "logs")


def kill(instance: TmuxInstance) -> None:
    instance.tmux("kill-server")
    shutil.rmtree(instance.socket.parent, ignore_errors=True)


@pytest.fixture
def tmux_pair(settings: Any) -> Iterator[tuple[TmuxInstance, TmuxInstance]]:
    """Two tmux instances, ``alpha`` and ``beta``, configured as provider instances of the same kind."""
    if shutil.which("tmux") is None:
        require_or_skip("TMUX IS NOT INSTALLED")
    alpha, beta = make_instance("alpha"), make_instance("beta")
    settings.TESS_RUNTIME_PROVIDERS = {"alpha": alpha.config(), "beta": beta.config()}
    reset_instances()
    try:
        yield alpha, beta
    finally:
        reset_instances()
        kill(alpha)
        kill(beta)


@pytest.fixture
def tmux(tmux_pair: tuple[TmuxInstance, TmuxInstance]) -> TmuxInstance:
    return tmux_pair[0]


@pytest.fixture
def start_session(cast: Cast, tmux: TmuxInstance) -> Callable[..., Session]:
    """Start a real runtime session on ``alpha`` owned by ``user`` (default: the owner)."""

    def start(user: User | None = None, title: str = "work") -> Session:
        return services.session_start(scope=scope_of(user or cast.owner, cast.acme), instance="alpha", title=title)

    return start


def output_of(session: Session) -> str:
    """All output the stream holds for ``session``, in order."""
    return "".join(e.body["data"] for e in session.events.filter(kind="output").order_by("seq"))


def pump_until(session: Session, text: str, timeout: float = 15.0) -> str:
    def step() -> bool:
        services.session_pump(session_id=session.pk)
        return text in output_of(session)

    assert wait_for(step, timeout=timeout), f"{text!r} never appeared in: {output_of(session)!r}"
    return output_of(session)
