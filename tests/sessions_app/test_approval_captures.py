"""Every executed approval leaves an ``approval.executed`` record in operational memory (seed 000, lifecycle
boundaries), whatever its action; auditors see those records in the admin by ids only, never their text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from approvals_app.models import Approval
from memory_app.plugin.models import OperationalMemoryRecord
from sessions_app.models import Session
from tests.conftest import Cast
from tests.providers_app.git_repos import git
from tests.sessions_app.test_gateway_tools import approve, emails, invoke, repo  # noqa: F401 (fixtures)
from tests.sessions_app.test_gateway_tools_runtime import commands  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def executed_records() -> list[OperationalMemoryRecord]:
    return list(OperationalMemoryRecord.objects.filter(source="approval.executed"))


def test_an_approved_gitops_write_asked_outside_any_session_is_captured_for_its_requester(
    emails: Cast,  # noqa: F811
    api_as: Any,
    browser_as: Any,
    repo: Path,  # noqa: F811
    django_capture_on_commit_callbacks: Any,
):
    capture = django_capture_on_commit_callbacks
    first = git(repo, "rev-list", "--max-parents=0", "HEAD")
    asked = invoke(
        api_as(emails.owner), "gitops.create_branch", {"repo": "app", "branch": "rel/1", "from": first}, capture
    )
    assert asked.status_code == 202, asked.json()
    assert executed_records() == []
    assert approve(browser_as(emails.approver), "approver@example.test", capture).status_code == 200

    approval = Approval.objects.get()
    assert approval.execution == "executed"
    [record] = executed_records()
    assert (record.tenant_id, record.owner_id) == (emails.acme.pk, emails.owner.pk)
    assert record.session == f"approval:{approval.pk}"
    assert str(approval.pk) in record.text and "gitops.create_branch" in record.text and "executed" in record.text


def test_an_approved_bootstrap_is_captured_in_the_session_it_started(
    emails: Cast,  # noqa: F811
    api_as: Any,
    browser_as: Any,
    commands: Any,  # noqa: F811
    django_capture_on_commit_callbacks: Any,
):
    capture = django_capture_on_commit_callbacks
    asked = invoke(api_as(emails.owner), "bootstrap.start", {"command": "greeter", "title": "boot"}, capture)
    assert asked.status_code == 202, asked.json()
    assert approve(browser_as(emails.approver), "approver@example.test", capture).status_code == 200

    session = Session.objects.get()
    [record] = executed_records()
    assert (record.owner_id, record.session) == (emails.owner.pk, str(session.pk))
    assert "bootstrap.start" in record.text


def test_auditors_see_executed_approvals_and_checkpoints_in_the_admin_by_ids_only(cast: Cast, client: Any):
    from memory_app.plugin import operator_memory_plugin
    from tests.conftest import scope_of
    from tests.factories import SessionFactory

    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    scope = scope_of(cast.owner, cast.acme).for_session(str(session.pk))
    plugin = operator_memory_plugin()
    executed = plugin.capture(scope, source="approval.executed", text="Approval of deploy-secret-plan: executed.")
    checkpoint = plugin.capture(scope, source="checkpoint", text="Checkpoint: summary mentions payroll-migration")
    elsewhere = SessionFactory.create(owner=cast.outsider, tenant=cast.globex)
    plugin.capture(
        scope_of(cast.outsider, cast.globex).for_session(str(elsewhere.pk)), source="checkpoint", text="globex only"
    )

    client.force_login(cast.auditor)
    page = client.get("/admin/memory_app/operationalmemoryrecord/")
    assert page.status_code == 200
    text = page.content.decode()
    for result in (executed, checkpoint):
        assert result.record.id in text
    assert "approval.executed" in text and "checkpoint" in text and str(session.pk) in text
    assert "deploy-secret-plan" not in text and "payroll-migration" not in text and "globex only" not in text
    assert {str(r.pk) for r in page.context["cl"].queryset} == {executed.record.id, checkpoint.record.id}
    change = f"/admin/memory_app/operationalmemoryrecord/{executed.record.id}/change/"
    assert client.get(change).status_code == 403  # no detail page: it would show the text
    client.force_login(cast.owner)  # a plain operator audits nothing
    assert client.get("/admin/memory_app/operationalmemoryrecord/").status_code == 403
