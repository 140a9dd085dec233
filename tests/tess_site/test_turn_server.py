"""The turn server (deploy/systemd/tess-turns.service): behind the documented proxy, operators' turns go to it
and everything else to tess-web, and it runs at the lower CPU priority its unit sets, so a burst of answers
being written leaves the other servers the CPU (bench/b_fleet_model.py)."""

from __future__ import annotations

import http.client
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.factories import SessionFactory
from tests.tess_site.children import Child
from tests.tess_site.production import HOST, start_production_web
from tests.tess_site.test_deploy import SYSTEMD, values
from tests.waiting import wait_for


def _nice(pid: int) -> int:
    # Field 19 of /proc/<pid>/stat, counted after the command name (which may hold spaces) closes.
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def _call(port: int, method: str, path: str, token: str, body: dict | None = None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Host": HOST, "Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if method == "POST":
        headers["Idempotency-Key"] = uuid.uuid4().hex
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def _served(child: Child, path: str) -> bool:
    return any(path in line for line in child.wrote().splitlines() if '"logger": "tess.access"' in line)


def test_the_turn_unit_is_the_web_server_at_a_lower_priority_on_its_own_port():
    (web,) = values(SYSTEMD / "tess-web.service", "ExecStart")
    (turns,) = values(SYSTEMD / "tess-turns.service", "ExecStart")
    assert turns == web.replace(
        "${TESS_BIND_ADDRESS}:${TESS_BIND_PORT}", "${TESS_TURNS_BIND_ADDRESS}:${TESS_TURNS_BIND_PORT}"
    )
    assert int(values(SYSTEMD / "tess-turns.service", "Nice")[0]) > 0
    assert values(SYSTEMD / "tess-web.service", "Nice") == [] and values(SYSTEMD / "tess-ws.service", "Nice") == []


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_behind_the_proxy_turns_reach_the_turn_server_and_the_rest_reach_the_web_server(
    tmp_path, cast, token_for, start_child: Callable[..., Child]
):
    tier = start_production_web(start_child, tmp_path / "web", turns=True)
    turns_server = tier.turns_child
    assert turns_server is not None
    token = token_for(cast.owner)
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="routed")
    turns = f"/api/v1/sessions/{session.pk}/turns/"

    status, turn = _call(tier.port, "POST", turns, token, {"text": "what am I working on?"})
    assert status == 200, turn
    status, listed = _call(tier.port, "GET", "/api/v1/sessions/", token)
    assert status == 200 and [s["id"] for s in listed["results"]] == [str(session.pk)]

    # Each server writes its access line after answering: wait for both before looking for the wrong one.
    assert wait_for(lambda: _served(turns_server, f"POST {turns}"), timeout=30)
    assert wait_for(lambda: _served(tier.child, "GET /api/v1/sessions/"), timeout=30)
    assert not _served(tier.child, f"POST {turns}") and not _served(turns_server, "GET /api/v1/sessions/")
    assert _nice(turns_server.process.pid) == 10 and _nice(tier.child.process.pid) == _nice(os.getpid())
