"""Runtime harnesses for the contract suite: a real peer behind each provider kind.

``HARNESSES`` maps a kind to a harness class; every contract test runs once per entry. A harness builds
a named provider instance against a real peer (tmux: a tmux server on a private socket under the test's
temporary directory, killed at teardown) and gives the tests what only the peer can: make the runtime
write exact bytes (``emit``) and see what input reached it (``received``). tmux, pi, Hermes and Matrix each
have their harness here.
"""

from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest

from providers_app.contract import AgentRuntimeProvider, RuntimeRef
from providers_app.tmux import TmuxProvider
from tess_site.accounts.models import Tenant
from tess_site.scope import Channel, Scope
from tests.waiting import wait_for

PEER = Path(__file__).with_name("peer.py")


class Harness(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def provider(self) -> AgentRuntimeProvider: ...

    def start(self, scope: Scope, title: str) -> RuntimeRef: ...
    def emit(self, ref: RuntimeRef, data: bytes) -> None: ...
    def received(self, ref: RuntimeRef) -> str: ...
    def close(self) -> None: ...


def tmux_config(directory: Path, *, command: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    peer_dir = directory / "peer"
    peer_dir.mkdir(exist_ok=True)
    config: dict[str, Any] = {
        "kind": "tmux",
        "socket": str(directory / "tmux.sock"),
        "command": [sys.executable, str(PEER), str(peer_dir)] if command is None else command,
        "log_dir": str(directory / "logs"),
        "refresh_seconds": 0.1,
        "timeout": 5,
    }
    config.update(extra)
    return config


def tmux(socket: str | Path, *args: str) -> str:
    """tmux on a test server, outside the provider (to set the scene or look behind its back)."""
    completed = subprocess.run(
        ["tmux", "-f", "/dev/null", "-S", str(socket), *args], capture_output=True, text=True, timeout=10, check=False
    )
    if completed.returncode:
        raise RuntimeError(f"tmux {args[0]} failed: {completed.stderr.strip()}")
    return completed.stdout


def active_pane(socket: str | Path, session_id: str) -> str:
    return tmux(socket, "display-message", "-p", "-t", session_id, "#{pane_id}").strip()


class TmuxHarness:
    """A tmux instance on its own socket, running the peer program in every session it starts."""

    recognises_retries = True  # the key is marked in the tmux session by the command that types the message

    def __init__(self, directory: Path, name: str, **extra: Any) -> None:
        self.name = name
        self.directory = directory
        self.config = tmux_config(directory, **extra)
        self.socket = self.config["socket"]
        self.provider = TmuxProvider(name=name, config=self.config)

    def start(self, scope: Scope, title: str) -> RuntimeRef:
        return self.provider.start_session(scope, title=title).ref

    def fifo(self, pane: str) -> Path:
        return self.directory / "peer" / f"{pane}.fifo"

    def emit_to_pane(self, pane: str, data: bytes) -> None:
        def open_writer() -> int | None:
            try:
                return os.open(self.fifo(pane), os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:  # not made yet, or its reader is not open yet
                if exc.errno in (errno.ENOENT, errno.ENXIO):
                    return None
                raise

        fd = wait_for(open_writer, f"the peer of {pane} to listen")
        try:
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def emit(self, ref: RuntimeRef, data: bytes) -> None:
        self.emit_to_pane(active_pane(self.socket, ref.runtime_id), data)

    def received(self, ref: RuntimeRef) -> str:
        inbox = self.directory / "peer" / f"{active_pane(self.socket, ref.runtime_id)}.in"
        return inbox.read_text() if inbox.exists() else ""

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=10, check=False)


HARNESSES: dict[str, Callable[..., Harness]] = {"tmux": TmuxHarness}

from .hermes_harness import HermesHarness  # noqa: E402  (each kind's harness, after the shared helpers it uses)
from .pi_harness import PiHarness, PiRpcHarness  # noqa: E402

HARNESSES |= {"pi": PiHarness, "pi-rpc": PiRpcHarness, "hermes": HermesHarness}

from .matrix_harness import MatrixHarness  # noqa: E402
from .synapse import synapse  # noqa: E402, F401  (the session's homeserver, for the matrix harness)

HARNESSES |= {"matrix": MatrixHarness}


H = TypeVar("H")


@pytest.fixture
def system_scope() -> Scope:
    """Providers take the caller's Scope; they never look people up, so an unsaved tenant will do."""
    return Scope(tenant=Tenant(slug="acme", name="Acme"), actor=None, channel=Channel.SYSTEM, correlation_id="t-1")


@pytest.fixture(params=sorted(HARNESSES))
def make_runtime(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Harness]]:
    """Build named instances of the parametrized kind; each one's peer is stopped at teardown."""
    made: list[Harness] = []

    def make(name: str = "primary", **extra: Any) -> Harness:
        factory = HARNESSES[request.param]
        # A harness may name session fixtures it needs (matrix: the homeserver); only its kind starts them.
        needs = {fixture: request.getfixturevalue(fixture) for fixture in getattr(factory, "needs", ())}
        harness = factory(tmp_path_factory.mktemp(name), name, **needs, **extra)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.close()


@pytest.fixture
def runtime(make_runtime: Callable[..., Harness]) -> Harness:
    return make_runtime()


def harness_factory(
    harness_class: Callable[..., H], tmp_path_factory: pytest.TempPathFactory, default_name: str
) -> Iterator[Callable[..., H]]:
    """Yield a maker of harnesses (each in its own temporary folder) and close every one at teardown."""
    made: list[H] = []

    def make(name: str = default_name, **extra: Any) -> H:
        harness = harness_class(tmp_path_factory.mktemp(name), name, **extra)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.close()  # type: ignore[attr-defined]


@pytest.fixture
def make_tmux(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., TmuxHarness]]:
    """tmux instances for the tmux-specific tests; every server is killed at teardown."""
    yield from harness_factory(TmuxHarness, tmp_path_factory, "local")
