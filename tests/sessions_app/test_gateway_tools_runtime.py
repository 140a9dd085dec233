"""Catalog tools that reach runtimes and processes: bootstrap on real tmux, MCP over stdio, fleet diagnostics."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from django.core import mail
from django.db import connection

from approvals_app.models import Approval
from providers_app.diagnostics import bounded_reads
from sessions_app.models import InboxItem, Session
from tess_site.audit.models import AuditEvent
from tess_site.leases import LeaseLost
from tests.conftest import Cast
from tests.sessions_app.conftest import output_of, pump_until
from tests.sessions_app.test_gateway_tools import approve, invoke

pytestmark = pytest.mark.django_db

MCP_SERVER = Path(__file__).parents[1] / "providers_app" / "mcp_server.py"


@pytest.fixture
def emails(cast: Cast) -> Cast:
    for user in (cast.owner, cast.approver):
        user.email = f"{user.username}@example.test"
        user.save(update_fields=["email"])
    return cast


@pytest.fixture
def commands(settings: Any, tmux: Any) -> Any:
    settings.TESS_BOOTSTRAP_COMMANDS = {
        "greeter": {"provider": "alpha", "argv": ["sh", "-c", "echo bootstrapped-$((6*7)); exec cat"], "tenants": None},
        "acme-only": {"provider": "alpha", "argv": ["sh", "-c", "exec cat"], "tenants": ["acme"]},
    }
    return tmux


def runtimes(tmux: Any) -> list[str]:
    return tmux.tmux("list-sessions", "-F", "#{session_id}").split()


# --- runtime bootstrap ----------------------------------------------------------------------------------


def test_bootstrap_starts_the_configured_command_in_tmux_only_after_approval(
    emails: Cast, api_as: Any, browser_as: Any, commands: Any, django_capture_on_commit_callbacks: Any
):
    capture = django_capture_on_commit_callbacks
    asked = invoke(api_as(emails.owner), "bootstrap.start", {"command": "greeter", "title": "boot"}, capture)
    assert asked.status_code == 202, asked.json()
    approval = asked.json()["approval"]
    assert approval["parameters"] == {
        "command": "greeter",
        "provider": "alpha",
        "argv": ["sh", "-c", "echo bootstrapped-$((6*7)); exec cat"],
        "title": "boot",
    }
    assert runtimes(commands) == [] and not Session.objects.exists()

    approver = browser_as(emails.approver)
    assert approve(approver, "approver@example.test", capture).status_code == 200
    session = Session.objects.get()
    assert session.owner == emails.owner and session.provider_instance == "alpha"
    assert runtimes(commands) == [session.runtime_id]
    assert "bootstrapped-42" in pump_until(session, "bootstrapped-42")
    assert Approval.objects.get(pk=approval["id"]).result == {
        "session_id": str(session.pk),
        "provider": "alpha",
        "runtime_id": session.runtime_id,
    }
    assert approve(approver, "approver@example.test", capture).status_code == 409
    assert runtimes(commands) == [session.runtime_id] and Session.objects.count() == 1
    assert "bootstrapped-42" in output_of(session)


def test_a_started_runtime_is_stopped_again_when_its_execution_does_not_commit(
    emails: Cast,
    api_as: Any,
    browser_as: Any,
    commands: Any,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
):
    from sessions_app import services
    from tess_site.errors import Conflict

    def bind_fails(**_: Any) -> Session:
        assert len(runtimes(commands)) == 1  # the runtime is up when binding it fails
        raise Conflict("That runtime session is already bound to a Tess session.")

    monkeypatch.setattr(services, "session_bind_started", bind_fails)
    capture = django_capture_on_commit_callbacks
    asked = invoke(api_as(emails.owner), "bootstrap.start", {"command": "greeter", "title": "boot"}, capture)
    assert approve(browser_as(emails.approver), "approver@example.test", capture).status_code == 200
    assert runtimes(commands) == [] and not Session.objects.exists()  # stopped again, nothing bound
    approval = Approval.objects.get(pk=asked.json()["approval"]["id"])
    assert approval.execution == "failed" and approval.result == {"error": {"code": "conflict"}}


def test_a_runtime_started_by_a_worker_that_lost_its_lease_is_stopped_before_the_retry(
    emails: Cast, api_as: Any, browser_as: Any, commands: Any, django_capture_on_commit_callbacks: Any
):
    from approvals_app import executions
    from approvals_app.models import ApprovalExecution
    from tess_site.leases import LeaseState

    capture = django_capture_on_commit_callbacks
    invoke(api_as(emails.owner), "bootstrap.start", {"command": "greeter", "title": "boot"}, capture)
    decided_only = lambda execute: capture(execute=False)  # noqa: E731 (decided; its task is not run here)
    assert approve(browser_as(emails.approver), "approver@example.test", decided_only).status_code == 200
    item = ApprovalExecution.objects.get()
    real_complete = executions.complete
    executions.complete = lambda *args, **kwargs: False  # the sweeper gave the lease away meanwhile
    try:
        with pytest.raises(LeaseLost):
            executions.execution_run(item_id=item.pk, worker="slow-worker")
    finally:
        executions.complete = real_complete
    assert runtimes(commands) == [] and not Session.objects.exists()
    ApprovalExecution.objects.filter(pk=item.pk).update(state=LeaseState.PENDING)  # as the sweeper does
    assert executions.execution_run(item_id=item.pk, worker="next-worker") is True
    session = Session.objects.get()
    assert runtimes(commands) == [session.runtime_id]  # exactly one runtime, and it is bound


def test_a_command_name_not_configured_for_the_tenant_is_404(
    cast: Cast, api_as: Any, commands: Any, django_capture_on_commit_callbacks: Any
):
    client = api_as(cast.outsider, cast.globex)
    response = invoke(client, "bootstrap.start", {"command": "acme-only"}, django_capture_on_commit_callbacks)
    assert response.status_code == 404 and response.json()["error"]["code"] == "bootstrap_command_unknown"
    assert not Approval.objects.exists()


def test_bootstrap_on_an_instance_without_the_capability_fails_closed(
    cast: Cast, api_as: Any, settings: Any, tmp_path: Path, django_capture_on_commit_callbacks: Any
):
    from providers_app.registry import reset_instances

    settings.TESS_RUNTIME_PROVIDERS = {"replay": {"kind": "pi", "sessions_dir": str(tmp_path)}}
    settings.TESS_BOOTSTRAP_COMMANDS = {"x": {"provider": "replay", "argv": ["pi"], "tenants": None}}
    reset_instances()
    response = invoke(api_as(cast.owner), "bootstrap.start", {"command": "x"}, django_capture_on_commit_callbacks)
    reset_instances()
    assert response.status_code == 501 and response.json()["error"]["code"] == "capability_unsupported"
    assert not Approval.objects.exists() and mail.outbox == []


# --- MCP discovery through the gateway ------------------------------------------------------------------


def test_mcp_discovery_through_the_catalog_lists_the_test_servers_tool_and_prompt(
    cast: Cast, api_as: Any, settings: Any, django_capture_on_commit_callbacks: Any
):
    settings.TESS_MCP_SERVERS = {"local": {"argv": [sys.executable, str(MCP_SERVER)], "tenants": None}}
    client = api_as(cast.owner)
    listed = invoke(client, "mcp.servers", {}, django_capture_on_commit_callbacks)
    assert listed.json()["result"] == {"servers": ["local"]}
    found = invoke(client, "mcp.discover", {"server": "local"}, django_capture_on_commit_callbacks)
    assert found.status_code == 200, found.json()
    assert [t["name"] for t in found.json()["result"]["tools"]] == ["add"]
    assert [p["name"] for p in found.json()["result"]["prompts"]] == ["triage"]


def test_mcp_discovery_without_configured_servers_fails_closed(
    cast: Cast, api_as: Any, settings: Any, django_capture_on_commit_callbacks: Any
):
    settings.TESS_MCP_SERVERS = {}
    response = invoke(api_as(cast.owner), "mcp.discover", {"server": "local"}, django_capture_on_commit_callbacks)
    assert response.status_code == 501


# --- fleet diagnostics and Discord ------------------------------------------------------------------------


def test_diagnostics_report_provider_health_queue_depth_and_session_counts_of_the_tenant(
    cast: Cast, api_as: Any, start_session: Any, django_capture_on_commit_callbacks: Any
):
    capture = django_capture_on_commit_callbacks
    session = start_session()
    start_session(title="second")
    InboxItem.objects.create(session=session, created_by=cast.owner, channel="cli", text="x", provider_key="k1")
    client = api_as(cast.owner)

    health = invoke(client, "diagnostics.provider_health", {}, capture).json()["result"]
    assert health["instances"]["alpha"]["ok"] is True
    assert health["instances"]["alpha"]["detail"]["sessions"] == 2

    depth = invoke(client, "diagnostics.queue_depth", {}, capture).json()["result"]
    assert depth["inbox"] == {"count": 1, "capped": False}
    assert depth["outbox"]["count"] == 0 and depth["approval_executions"]["count"] == 0

    counts = invoke(client, "diagnostics.session_counts", {}, capture).json()["result"]
    assert counts["by_status"]["running"] == {"count": 2, "capped": False}

    outsider = api_as(cast.outsider, cast.globex)
    theirs = invoke(outsider, "diagnostics.session_counts", {}, capture).json()["result"]
    assert theirs["by_status"]["running"]["count"] == 0
    assert invoke(outsider, "diagnostics.queue_depth", {}, capture).json()["result"]["inbox"]["count"] == 0


def test_a_provider_that_hangs_is_reported_as_timed_out_not_waited_for(
    cast: Cast,
    api_as: Any,
    tmux: Any,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
):
    import threading

    from providers_app import diagnostics

    release = threading.Event()

    def hang(name: str) -> dict[str, Any]:
        release.wait(30)
        return {"ok": True}

    monkeypatch.setattr(diagnostics, "instance_health", hang)
    settings.TESS_DIAGNOSTICS_CHECK_SECONDS = 1
    try:
        response = invoke(api_as(cast.owner), "diagnostics.provider_health", {}, django_capture_on_commit_callbacks)
    finally:
        release.set()
    result = response.json()["result"]
    assert result["ok"] is False and result["instances"]["alpha"]["detail"] == {"error": "timeout"}


@pytest.mark.postgres
def test_diagnostic_reads_run_under_a_statement_timeout_and_restore_the_callers(settings: Any):
    settings.TESS_DIAGNOSTICS_STATEMENT_TIMEOUT_MS = 1234
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        before = cursor.fetchone()[0]
    with bounded_reads(), connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "1234ms"
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == before


@pytest.mark.postgres
def test_a_diagnostic_read_past_its_timeout_is_a_typed_503_and_the_transaction_survives(settings: Any):
    from providers_app.diagnostics import DiagnosticsTimeout

    settings.TESS_DIAGNOSTICS_STATEMENT_TIMEOUT_MS = 100
    with pytest.raises(DiagnosticsTimeout), bounded_reads(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(2)")
    assert Session.objects.count() == 0  # the surrounding transaction still answers


def test_discord_status_reports_configuration_and_counts_never_keys(
    cast: Cast, api_as: Any, settings: Any, django_capture_on_commit_callbacks: Any
):
    settings.TESS_DISCORD_ENABLED = True
    settings.TESS_DISCORD_PUBLIC_KEY = "ab" * 32
    settings.TESS_DISCORD_BOT_TOKEN = "secret-bot-token-value"
    response = invoke(api_as(cast.owner), "discord.status", {}, django_capture_on_commit_callbacks)
    result = response.json()["result"]
    assert result["enabled"] is True and result["bot_token_configured"] is True
    assert result["bound_channels"] == {"count": 0, "capped": False} and result["you_are_linked"] is False
    assert "secret-bot-token-value" not in response.content.decode()
    settings.TESS_DISCORD_ENABLED = False
    off = invoke(api_as(cast.owner), "discord.status", {}, django_capture_on_commit_callbacks)
    assert off.json()["result"]["enabled"] is False
    assert AuditEvent.objects.filter(action="catalog.invoked", target_id="discord.status").count() == 2


# --- the durable inbox/state hooks ----------------------------------------------------------------------


def test_the_inbox_hooks_enqueue_then_claim_and_deliver_exactly_once(cast: Cast, start_session: Any):
    from providers_app.capabilities import CapabilityName, capability
    from sessions_app import services
    from sessions_app.models import AttachMode
    from tess_site.errors import NotFound
    from tests.conftest import scope_of

    hooks = capability(CapabilityName.DURABLE_INBOX_STATE)
    session = start_session()
    scope = scope_of(cast.owner, cast.acme)
    services.session_attach(scope=scope, session_id=session.pk, mode=AttachMode.INTERACTIVE)
    queued = hooks.operation("enqueue")(scope, session_id=session.pk, text="hello-hooks")
    depth = hooks.operation("depth")(scope)
    assert depth["inbox"]["count"] == 1

    claim = hooks.operation("claim")
    assert claim(scope, item_id=queued["inbox_id"], worker="w1") == {"inbox_id": queued["inbox_id"], "delivered": True}
    assert claim(scope, item_id=queued["inbox_id"], worker="w2")["delivered"] is False
    assert "got:hello-hooks" in pump_until(session, "got:hello-hooks")
    assert output_of(session).count("got:hello-hooks") == 1
    assert hooks.operation("depth")(scope)["inbox"]["count"] == 0
    assert hooks.operation("checkpoint")(scope, session_id=session.pk)["session_id"] == str(session.pk)

    outsider = scope_of(cast.outsider, cast.globex)
    with pytest.raises(NotFound):
        hooks.operation("checkpoint")(outsider, session_id=session.pk)
    assert claim(outsider, item_id=queued["inbox_id"], worker="w3")["delivered"] is False
