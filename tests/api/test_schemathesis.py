"""Schemathesis against the live application (daphne on the test database) with a personal token: no 5xx
anywhere and every documented response conforming to the OpenAPI schema."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.factories import SessionFactory
from tests.tess_site.children import VENV_BIN, Child, child_env, free_port, serves_healthz
from tests.tess_site.conftest import start_child as start_child
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

EXAMPLES = os.environ.get("TESS_SCHEMATHESIS_EXAMPLES", "10")


def test_the_api_has_no_server_errors_and_conforms_to_its_schema(cast, token_for, start_child, tmp_path):
    SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="st")
    port = free_port()
    child: Child = start_child(
        "daphne",
        [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"],
        child_env(TESS_TOKEN_RATE="10000/min", TESS_DISCORD_LINK_RATE="10000/min", TESS_APPROVAL_RATE="10000/min"),
    )
    assert wait_for(lambda: not child.alive() or serves_healthz(port), timeout=30) and child.alive(), child.output()
    token = token_for(cast.owner)

    # One pass over every route, each response checked for a server error and for conformance to its schema.
    checks = "not_a_server_error,response_schema_conformance,content_type_conformance"
    result = subprocess.run(
        [
            str(VENV_BIN / "schemathesis"),
            "run",
            f"http://127.0.0.1:{port}/api/schema/?format=json",
            "--header",
            f"Authorization: Bearer {token}",
            "--checks",
            checks,
            "--max-examples",
            EXAMPLES,
            "--seed",
            "1",
            "--generation-deterministic",
            "--request-timeout",
            "30",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # schemathesis keeps its state in ./.schemathesis
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-4000:]
