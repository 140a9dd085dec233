"""The embedded default: one server process without Redis pumps tmux output into live websocket streams.

Also the demo session command that ``make run`` calls, and when the embedded pump may start.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command
from websockets.sync.client import connect

from sessions_app import pump, services
from sessions_app.models import Session, SessionStatus
from tess_site.accounts import services as accounts
from tess_site.scope import Role
from tests.tess_site.children import ROOT, VENV_BIN, Child, child_env, free_port, serves_healthz
from tests.waiting import wait_for


@pytest.mark.parametrize(
    ("argv", "run_main", "serving"),
    [
        (["manage.py", "runserver"], "true", True),
        (["manage.py", "runserver"], None, False),  # the autoreloader's watching parent
        (["manage.py", "runserver", "--noreload"], None, True),
        (["/venv/bin/daphne", "tess_site.asgi:application"], None, True),
        (["manage.py", "migrate"], "true", False),
        (["/venv/bin/pytest"], None, False),
        (["/venv/bin/celery", "-A", "tess_site", "worker"], None, False),
    ],
)
def test_the_embedded_pump_starts_only_in_a_serving_process(argv, run_main, serving, monkeypatch):
    if run_main is None:
        monkeypatch.delenv("RUN_MAIN", raising=False)
    else:
        monkeypatch.setenv("RUN_MAIN", run_main)
    assert pump.is_serving(argv) is serving


def test_the_embedded_pump_is_not_running_in_tests():
    assert pump._started is False


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_one_server_process_without_redis_streams_live_tmux_output(
    cast, start_session, tmux, token_for, start_child: Callable[..., Child]
):
    session = start_session()
    port = free_port()
    env = child_env(TESS_RUNTIME_PROVIDERS=json.dumps(settings.TESS_RUNTIME_PROVIDERS), TESS_PUMP_INTERVAL_MS="100")
    env.pop("REDIS_URL", None)
    child = start_child(
        "daphne-embedded",
        [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"],
        env,
    )
    assert wait_for(lambda: not child.alive() or serves_healthz(port), timeout=30), child.output()
    assert child.alive(), child.output()
    headers = {"Authorization": f"Bearer {token_for(cast.owner)}"}
    url = f"ws://127.0.0.1:{port}/ws/sessions/{session.pk}/stream/?cursor=0"
    with connect(url, additional_headers=headers, proxy=None, open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=20))["kind"] == "status"
        tmux.tmux("send-keys", "-t", session.runtime_id, "-l", "live-from-tmux")
        tmux.tmux("send-keys", "-t", session.runtime_id, "Enter")
        seen = ""
        while "got:live-from-tmux" not in seen:
            frame = json.loads(ws.recv(timeout=20))
            if frame["kind"] == "output":
                seen += frame["body"]["data"]  # only the server's own pump writes output events here


@pytest.mark.django_db
def test_the_demo_session_command_explains_how_to_install_tmux_when_it_is_missing(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    out = io.StringIO()
    call_command("tess_demo_session", stdout=out)
    assert "apt-get install tmux" in out.getvalue()
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_the_demo_session_command_binds_one_session_to_the_demo_operator(settings, tmux):
    settings.TESS_RUNTIME_PROVIDERS = {"demo": tmux.config()}
    from providers_app.registry import reset_instances

    reset_instances()
    tenant = accounts.tenant_create(slug="demo")
    operator, _ = accounts.user_ensure(username="operator")
    accounts.membership_grant(tenant=tenant, user=operator, role=Role.OPERATOR)
    call_command("tess_demo_session", stdout=io.StringIO())
    out = io.StringIO()
    call_command("tess_demo_session", stdout=out)  # again: nothing new
    session = Session.objects.get()
    assert (session.owner, session.tenant, session.status) == (operator, tenant, SessionStatus.RUNNING)
    assert "is running" in out.getvalue()
    tmux.tmux("kill-server")  # a reboot: the runtime is gone, so the next run replaces it
    call_command("tess_demo_session", stdout=io.StringIO())
    assert [s.status for s in Session.objects.order_by("created_at")] == [SessionStatus.EXITED, SessionStatus.RUNNING]
    reset_instances()


@pytest.mark.django_db
def test_the_demo_pi_session_shows_what_its_sample_agent_cost(settings, tmux, tmp_path):
    from providers_app.registry import reset_instances
    from sessions_app.models import UsageRecord

    settings.VAR_DIR = str(tmp_path)
    settings.TESS_RUNTIME_PROVIDERS = {"demo": tmux.config(), "demo-pi": {"kind": "pi", "sessions_dir": "demo"}}
    reset_instances()
    tenant = accounts.tenant_create(slug="demo")
    operator, _ = accounts.user_ensure(username="operator")
    accounts.membership_grant(tenant=tenant, user=operator, role=Role.OPERATOR)
    for _ in range(2):  # again: nothing new
        call_command("tess_demo_session", stdout=io.StringIO())
    pi = Session.objects.get(provider_instance="demo-pi")
    assert (pi.owner, pi.title, pi.status) == (operator, "refactor billing", SessionStatus.RUNNING)
    services.session_pump(session_id=pi.pk)
    rows = UsageRecord.objects.filter(session=pi)
    assert rows.count() == 13
    assert sum(row.cost for row in rows if row.cost is not None) == Decimal("0.4881")
    assert [row.model for row in rows if row.cost_source == "unpriced"] == ["local-coder"]
    reset_instances()


def test_the_embedded_default_answers_a_turn_and_replays_it_on_sqlite(start_child: Callable[..., Child]) -> None:
    """What `make run` serves: SQLite, no Redis, the dev settings, the demo sessions. A turn is answered (its
    three steps commit on SQLite too) and the same key replays the answer."""
    var = Path(tempfile.mkdtemp(prefix="tess-", dir="/tmp"))  # short: tmux sockets live under it
    env = child_env(DJANGO_SETTINGS_MODULE="tess_site.settings.dev", TESS_VAR_DIR=str(var), TESS_DEMO_SESSION="1")
    for name in ("DATABASE_URL", "REDIS_URL", "TESS_RUNTIME_PROVIDERS"):
        env.pop(name, None)
    manage = [str(VENV_BIN / "python"), "manage.py"]
    try:
        printed = ""
        for command in (["migrate", "--noinput"], ["tess_demo"], ["tess_demo_session"]):
            done = subprocess.run([*manage, *command], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
            printed += done.stdout
        password = re.search(r"operator\s+(\S+)\s+\(operator\)", printed)
        assert password is not None, printed
        port = free_port()
        daphne = [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"]
        child = start_child("daphne-sqlite", daphne, env)
        assert wait_for(lambda: not child.alive() or serves_healthz(port), timeout=30), child.output()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1", timeout=30, trust_env=False) as client:
            login = {"username": "operator", "password": password[1]}
            client.headers["Authorization"] = f"Bearer {client.post('/auth/token/', json=login).json()['token']}"
            sessions = client.get("/sessions/").json()["results"]
            session_id = next(s["id"] for s in sessions if s["title"] == "refactor billing")
            path, key = f"/sessions/{session_id}/turns/", {"Idempotency-Key": "turn-1"}
            first = client.post(path, json={"text": "hello"}, headers=key)
            again = client.post(path, json={"text": "hello"}, headers=key)
        assert first.status_code == 200, first.text
        assert again.status_code == 200 and again.headers.get("Idempotency-Replayed") == "true"
        assert again.json()["turn_id"] == first.json()["turn_id"]
    finally:
        for socket in (var / "tmux").glob("*.sock"):
            subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True, check=False)
        shutil.rmtree(var, ignore_errors=True)


@pytest.mark.django_db
def test_a_session_that_fails_in_the_database_does_not_keep_the_others_from_being_pumped(cast, monkeypatch):
    from django.db import OperationalError

    from tests.factories import SessionFactory

    broken, fine = (SessionFactory.create(owner=cast.owner, tenant=cast.acme) for _ in range(2))
    tried: list[str] = []

    def session_pump(*, session_id):
        tried.append(str(session_id))
        if str(session_id) == str(broken.pk):
            raise OperationalError("deadlock detected")
        return 1

    monkeypatch.setattr(services, "session_pump", session_pump)
    assert pump.pump_once() == 1
    assert sorted(tried) == sorted([str(broken.pk), str(fine.pk)])
