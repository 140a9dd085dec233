"""The embedded default: one server process without Redis pumps tmux output into live websocket streams.

Also the demo session command that ``make run`` calls, and when the embedded pump may start.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from decimal import Decimal

import pytest
from django.conf import settings
from django.core.management import call_command
from websockets.sync.client import connect

from sessions_app import pump, services
from sessions_app.models import Session, SessionStatus
from tess_site.accounts import services as accounts
from tess_site.scope import Role
from tests.tess_site.children import VENV_BIN, Child, child_env, free_port, serves_healthz
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
