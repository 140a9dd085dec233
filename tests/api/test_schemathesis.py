"""Schemathesis against the live application as production runs it: the web and worker units under
``tess_site.settings.prod`` with real Redis (``tests.tess_site.production``), on the test database, with a
personal token. One pass over the API checks everything at once: no 5xx anywhere, every answered status is
documented, and every documented response (body and content type) conforms to the OpenAPI schema."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.factories import SessionFactory
from tests.tess_site.children import VENV_BIN
from tests.tess_site.conftest import start_child as start_child
from tests.tess_site.production import HEADERS, start_production_web, start_production_worker

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

# Random examples per operation in the fuzzing and stateful phases. The coverage phase, which does not depend on
# this number, makes about two thirds of the run's requests (every boundary and missing or malformed value of
# every operation) and is what finds an undocumented status: with DELETE /memory/'s 200 left undocumented, the
# coverage phase alone fails the run and the fuzzing phase alone (10 examples) passes. Five keeps random bodies
# on every operation at half the cost.
EXAMPLES = os.environ.get("TESS_SCHEMATHESIS_EXAMPLES", "5")
CHECKS = "not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance"


def test_the_api_has_no_server_errors_and_conforms_to_its_schema(cast, token_for, start_child, tmp_path):
    SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="st")
    web = start_production_web(start_child, tmp_path / "web")
    # Health answers 503 while no worker answers its ping, as it should: production runs one.
    start_production_worker(start_child, tmp_path / "worker")
    token = token_for(cast.owner)
    headers = [arg for name, value in {**HEADERS, "Authorization": f"Bearer {token}"}.items()
               for arg in ("--header", f"{name}: {value}")]  # fmt: skip
    run = subprocess.run(
        [
            str(VENV_BIN / "schemathesis"),
            "run",
            # gunicorn itself: the schema is Tess's, not the proxy's (nginx answers a NUL in a path on its own).
            f"http://127.0.0.1:{web.http_port}/api/schema/?format=json",
            *headers,
            "--checks",
            CHECKS,
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
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-4000:] + web.child.output()[-3000:]
