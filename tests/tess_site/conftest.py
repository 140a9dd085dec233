"""Fixtures for tests that run the real server or a real Celery worker in a child process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from tests.waiting import wait_for

from .children import VENV_BIN, Child, child_env, free_port, serves_healthz


@pytest.fixture(scope="module")
def start_child(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Child]]:
    """Start children for the module; every one is stopped at teardown, whatever the tests did."""
    children: list[Child] = []

    def start(name: str, args: list[str], env: dict[str, str]) -> Child:
        child = Child(args, env, tmp_path_factory.mktemp(name) / "output.log")
        children.append(child)
        return child

    try:
        yield start
    finally:
        for child in children:
            child.stop()


@dataclass(frozen=True)
class Daphne:
    child: Child
    address: str  # 127.0.0.1:<port>


@pytest.fixture(scope="module")
def daphne(django_db_setup: None, start_child: Callable[..., Child]) -> Iterator[Daphne]:
    """The real ASGI app (``tess_site.asgi:application``) served by daphne, one per module, on the shared test
    database (so tests that need it to see their rows use ``transaction=True``)."""
    port = free_port()
    child = start_child(
        "daphne",
        [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"],
        child_env(),
    )
    if not wait_for(lambda: not child.alive() or serves_healthz(port), timeout=30):
        pytest.fail(f"daphne did not answer on port {port}:\n{child.output()}")
    if not child.alive():
        pytest.fail(f"daphne exited:\n{child.output()}")
    yield Daphne(child=child, address=f"127.0.0.1:{port}")


@pytest.fixture(scope="module")
def server(daphne: Daphne) -> str:
    """The address of the module's daphne."""
    return daphne.address
