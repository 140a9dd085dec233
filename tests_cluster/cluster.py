"""A two-node Tess deployment on one machine, for the cluster suite.

Against the suite's PostgreSQL test database and a Redis of its own (a ``redis-server`` on a free port,
never the shared one, so the suite may kill and restart it): two ASGI nodes (daphne) on free ports, two
Celery workers and beat — the same processes a production deployment runs, with short lease and sweep
intervals. Every process dies with the test process (``tests.tess_site.children``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from celery import Celery
from websockets.sync.client import ClientConnection, connect

from tests.sessions_app.conftest import ECHO_COMMAND, TmuxInstance, kill, make_instance
from tests.tess_site.children import VENV_BIN, Child, child_env, free_port, serves_healthz
from tests.waiting import wait_for

LEASE_SECONDS = 5  # the smallest lease the settings accept: a killed worker's item is swept within seconds
SWEEP_SECONDS = 1
START_SECONDS = 90  # two cores shared with other suites: Django start-up of five processes takes a while


class RedisServer:
    """A private ``redis-server`` without persistence: a restart loses every queued message, as a crash would."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.child: Child | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert self.child is None or not self.child.alive(), "already running"
        self.starts += 1
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.child = Child([*args, "--dir", str(self.root)], dict(os.environ), self.root / f"redis-{self.starts}.log")
        if not wait_for(lambda: not self.child_alive() or self.ping(), timeout=20):
            raise RuntimeError(f"redis-server did not answer on {self.port}")

    def child_alive(self) -> bool:
        return self.child is not None and self.child.alive()

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: no shutdown, no save; whatever it held is gone."""
        assert self.child is not None
        os.kill(self.child.process.pid, signal.SIGKILL)
        self.child.process.wait(timeout=10)
        self.child.stop()

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()


@dataclass
class Node:
    name: str
    port: int
    child: Child

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"


@dataclass
class Worker:
    name: str  # the Celery node name, e.g. w1@host
    child: Child

    @property
    def pid(self) -> int:
        return self.child.process.pid


@dataclass
class Cluster:
    root: Path
    redis: RedisServer
    tmux: TmuxInstance
    nodes: dict[str, Node] = field(default_factory=dict)
    workers: dict[str, Worker] = field(default_factory=dict)
    beat: Child | None = None
    starts: int = 0
    _control: Celery | None = None

    # --- configuration ---

    @property
    def hold(self) -> Path:
        """While this file exists, a worker's send to tmux stops before typing (``worker_app``)."""
        return self.root / "hold"

    def env(self) -> dict[str, str]:
        providers = {"alpha": self.tmux.config()}
        return child_env(
            DJANGO_SETTINGS_MODULE="tests_cluster.settings",
            REDIS_URL=self.redis.url,
            TESS_RUNTIME_PROVIDERS=json.dumps(providers),
            TESS_LEASE_SECONDS=str(LEASE_SECONDS),
            TESS_SWEEP_INTERVAL_SECONDS=str(SWEEP_SECONDS),
            TESS_PUMP_INTERVAL_MS="1000",
            TESS_STREAM_HEARTBEAT_SECONDS="5",
            TESS_STREAM_RECHECK_SECONDS="1",
            TESS_TEST_SEND_HOLD=str(self.hold),
            TESS_LOG_LEVEL="WARNING",
        )

    def _child(self, name: str, args: list[str], **extra: str) -> Child:
        self.starts += 1
        return Child(args, {**self.env(), **extra}, self.root / f"{name}-{self.starts}.log")

    # --- processes ---

    def start(self) -> None:
        self.redis.start()
        for name in ("a", "b"):
            port = free_port()
            args = [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"]
            # As deployed, the nodes keep a connection pool; the workers and beat do not (the test settings'
            # default).
            child = self._child(f"node-{name}", args, TESS_DB_POOL="1")
            self.nodes[name] = Node(name=name, port=port, child=child)
        for name in ("w1", "w2"):
            self.start_worker(name, wait=False)
        beat_args = ["-A", "tess_site.celery", "beat", "--schedule", str(self.root / "beat-schedule")]
        self.beat = self._child("beat", [str(VENV_BIN / "celery"), *beat_args, "--loglevel=WARNING"])
        for node in self.nodes.values():
            self.wait_for_node(node)
        for worker in self.workers.values():
            self.wait_for_worker(worker)
        if not self.beat.alive():
            raise RuntimeError(f"beat exited:\n{self.beat.output()}")

    def wait_for_node(self, node: Node) -> None:
        def ready() -> bool:
            return not node.child.alive() or serves_healthz(node.port)

        if not wait_for(ready, timeout=START_SECONDS) or not node.child.alive():
            raise RuntimeError(f"node {node.name} did not answer:\n{node.child.output()}")

    def start_worker(self, name: str, *, wait: bool = True) -> Worker:
        node_name = f"{name}-{uuid.uuid4().hex[:6]}@{socket.gethostname()}"
        args = [
            str(VENV_BIN / "celery"),
            "-A",
            "tests_cluster.worker_app",
            "worker",
            "--pool=solo",
            "--concurrency=1",
            "--without-gossip",
            "--without-mingle",
            "--hostname",
            node_name,
            "--loglevel=WARNING",
        ]
        worker = Worker(name=node_name, child=self._child(f"worker-{name}", args))
        self.workers[name] = worker
        if wait:
            self.wait_for_worker(worker)
        return worker

    def wait_for_worker(self, worker: Worker) -> None:
        def ready() -> bool:
            return not worker.child.alive() or bool(self.control().control.ping(destination=[worker.name], timeout=1))

        if not wait_for(ready, timeout=START_SECONDS, interval=0.5) or not worker.child.alive():
            raise RuntimeError(f"worker {worker.name} did not answer:\n{worker.child.output()}")

    def revive(self) -> None:
        """Replace every worker that died (a test killed it), so the next test has two again."""
        for name, worker in list(self.workers.items()):
            if not worker.child.alive():
                worker.child.stop()
                self.start_worker(name)

    def stop(self) -> None:
        children = [n.child for n in self.nodes.values()] + [w.child for w in self.workers.values()]
        for child in [*children, self.beat]:
            if child is not None:
                child.stop()
        self.redis.stop()

    def control(self) -> Celery:
        """A Celery client of the cluster's broker (the suite's own app runs tasks eagerly)."""
        if self._control is None:
            self._control = Celery("tess-cluster-control", broker=self.redis.url)
            self._control.conf.broker_connection_retry_on_startup = True
        return self._control

    def forget_control(self) -> None:
        """Drop the control client's connections (after a Redis restart they are dead)."""
        if self._control is not None:
            self._control.close()
            self._control = None

    def processed(self, task: str) -> dict[str, int]:
        """How many ``task`` each live worker has started, by its own count."""
        stats = self.control().control.inspect(timeout=3).stats() or {}
        return {name: int(s.get("total", {}).get(task, 0)) for name, s in stats.items()}

    def logs(self) -> str:
        parts = [f"--- node {n.name}\n{n.child.output()}" for n in self.nodes.values()]
        parts += [f"--- worker {w.name}\n{w.child.output()}" for w in self.workers.values()]
        if self.beat is not None:
            parts.append(f"--- beat\n{self.beat.output()}")
        return "\n".join(parts)


def make_cluster(root: Path) -> Cluster:
    if shutil.which("redis-server") is None or shutil.which("tmux") is None:
        raise RuntimeError("the cluster suite needs redis-server and tmux (.ci/run installs them)")
    return Cluster(root=root, redis=RedisServer(root), tmux=make_instance("cluster"))


def remove_cluster(cluster: Cluster) -> None:
    cluster.stop()
    kill(cluster.tmux)


def api(node: Node, token: str, timeout: float = 30) -> httpx.Client:
    """An API client of one node, authenticated with a personal token."""
    return httpx.Client(
        base_url=node.url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout, trust_env=False
    )


def bearer_socket(url: str, token: str) -> ClientConnection:
    """A websocket as the CLI opens it: the personal token in the Authorization header."""
    return connect(
        url, additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=10, close_timeout=2, proxy=None
    )


def idem() -> dict[str, str]:
    return {"Idempotency-Key": uuid.uuid4().hex}


def json_of(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


__all__ = ["ECHO_COMMAND", "Cluster", "Node", "RedisServer", "Worker", "api", "idem", "json_of", "make_cluster"]
