"""Catalog tools through the gateway's policy: validation, authority, approvals, hand-offs, fail-closed."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from django.core import mail

from approvals_app.executions import execution_run
from approvals_app.models import Approval, ApprovalExecution, Handoff
from tess_site.audit.models import AuditEvent
from tests.approvals_app.approval_fixtures import LINK_RE
from tests.conftest import Cast, csrf_token
from tests.factories import SessionFactory
from tests.providers_app.git_repos import git, make_repo, ref

pytestmark = pytest.mark.django_db

_keys = itertools.count(1)


@pytest.fixture
def repo(settings: Any, tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "app")
    settings.TESS_GITOPS_REPOS = {"app": {"path": str(path), "tenants": ["acme"]}}
    return path


@pytest.fixture
def emails(cast: Cast) -> Cast:
    for user in (cast.owner, cast.approver):
        user.email = f"{user.username}@example.test"
        user.save(update_fields=["email"])
    return cast


def invoke(client: Any, tool: str, data: dict[str, Any], capture: Any, *, session: Any = None, key: str = "") -> Any:
    body: dict[str, Any] = {"input": data}
    if session is not None:
        body["session"] = str(session.pk)
    with capture(execute=True):
        return client.post(
            f"/api/v1/catalog/{tool}/invoke/", body, format="json", HTTP_IDEMPOTENCY_KEY=key or f"k-{next(_keys)}"
        )


def approve(approver_client: Any, address: str, capture: Any) -> Any:
    tokens = [t for m in mail.outbox if m.to == [address] for t in LINK_RE.findall(str(m.body))]
    assert len(tokens) == 1, tokens
    with capture(execute=True):
        return approver_client.post(
            f"/approvals/{tokens[0]}/", {"decision": "approve", "csrfmiddlewaretoken": csrf_token(approver_client)}
        )


# --- the catalog ------------------------------------------------------------------------------------------


def test_the_catalog_lists_every_family_with_its_contract(cast: Cast, api_as: Any, repo: Path):
    response = api_as(cast.owner).get("/api/v1/catalog/")
    assert response.status_code == 200
    entries = {e["id"]: e for e in response.json()["results"]}
    assert {e["family"] for e in entries.values()} == {
        "gitops",
        "fleet_diagnostics",
        "runtime_bootstrap",
        "discord",
        "mcp_discovery",
    }
    for entry in entries.values():
        assert set(entry) >= {"id", "family", "authority", "input_schema", "read_only", "capability"}
    assert entries["gitops.status"]["authority"] == "tess" and entries["gitops.status"]["read_only"] is True
    assert entries["gitops.create_branch"]["authority"] == "human_approval"
    assert entries["gitops.create_branch"]["read_only"] is False
    assert entries["gitops.merge_request"]["authority"] == "mos"
    assert entries["gitops.status"]["available"] is True and entries["gitops.status"]["choices"] == {"repo": ["app"]}
    assert entries["mcp.discover"]["available"] is False  # no MCP server configured here
    names = {(c["name"], c["instance"]) for c in response.json()["capabilities"]}
    assert ("fleet_diagnostics", None) in names and ("gitops", None) in names


def test_the_catalog_is_tenant_scoped(cast: Cast, api_as: Any, repo: Path):
    response = api_as(cast.outsider, cast.globex).get("/api/v1/catalog/")
    entries = {e["id"]: e for e in response.json()["results"]}
    assert entries["gitops.status"]["choices"] == {"repo": []}


def test_the_catalog_needs_a_credential(client: Any):
    assert client.get("/api/v1/catalog/").status_code in (401, 403)


def test_the_catalog_is_in_the_openapi_schema(cast: Cast, api_as: Any):
    schema = api_as(cast.owner).get("/api/schema/?format=json").json()
    assert "/api/v1/catalog/" in schema["paths"]
    assert "post" in schema["paths"]["/api/v1/catalog/{tool_id}/invoke/"]


# --- tess authority: read-only, run now -----------------------------------------------------------------


def test_a_read_only_tool_returns_real_data_and_is_audited(
    cast: Cast, api_as: Any, repo: Path, django_capture_on_commit_callbacks: Any
):
    response = invoke(api_as(cast.owner), "gitops.log", {"repo": "app", "limit": 2}, django_capture_on_commit_callbacks)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "done" and body["authority"] == "tess"
    assert [c["commit"] for c in body["result"]["commits"]] == git(repo, "rev-list", "--max-count=2", "HEAD").split()
    audit = AuditEvent.objects.get(action="catalog.invoked")
    assert (audit.target_id, audit.outcome, audit.metadata["operation"]) == ("gitops.log", "done", "log")


def test_the_same_idempotency_key_replays_the_answer(
    cast: Cast, api_as: Any, repo: Path, django_capture_on_commit_callbacks: Any
):
    client = api_as(cast.owner)
    first = invoke(client, "gitops.branches", {"repo": "app"}, django_capture_on_commit_callbacks, key="same")
    git(repo, "branch", "later")
    again = invoke(client, "gitops.branches", {"repo": "app"}, django_capture_on_commit_callbacks, key="same")
    assert again.headers["Idempotency-Replayed"] == "true" and again.json() == first.json()
    assert AuditEvent.objects.filter(action="catalog.invoked").count() == 1


def test_an_invocation_without_an_idempotency_key_is_refused(cast: Cast, api_as: Any, repo: Path):
    response = api_as(cast.owner).post(
        "/api/v1/catalog/gitops.status/invoke/", {"input": {"repo": "app"}}, format="json"
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == "idempotency_key_required"


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"repo": "app", "limit": 0}, "/limit"),
        ({"repo": "app", "limit": "ten"}, "/limit"),
        ({}, "/"),
        ({"repo": "app", "owner": "someone"}, "/"),
        ({"repo": "-c core.pager=sh"}, "/repo"),
    ],
)
def test_input_that_breaks_the_schema_is_a_typed_400_naming_the_path(
    cast: Cast, api_as: Any, repo: Path, django_capture_on_commit_callbacks: Any, data: dict[str, Any], path: str
):
    response = invoke(api_as(cast.owner), "gitops.log", data, django_capture_on_commit_callbacks)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "catalog_input_invalid" and error["details"]["path"] == path
    assert not AuditEvent.objects.filter(action="catalog.invoked").exists()


def test_an_unknown_tool_is_404(cast: Cast, api_as: Any, django_capture_on_commit_callbacks: Any):
    response = invoke(api_as(cast.owner), "gitops.force_push", {}, django_capture_on_commit_callbacks)
    assert response.status_code == 404 and response.json()["error"]["code"] == "catalog_tool_unknown"


def test_a_tool_whose_capability_is_absent_fails_closed(
    cast: Cast, api_as: Any, settings: Any, django_capture_on_commit_callbacks: Any
):
    settings.TESS_GITOPS_REPOS = {}
    response = invoke(api_as(cast.owner), "gitops.status", {"repo": "app"}, django_capture_on_commit_callbacks)
    assert response.status_code == 501 and response.json()["error"]["code"] == "capability_unsupported"
    assert AuditEvent.objects.get(action="catalog.invoked").outcome == "refused"
    asked = invoke(
        api_as(cast.owner), "gitops.create_branch", {"repo": "app", "branch": "x"}, django_capture_on_commit_callbacks
    )
    assert asked.status_code == 501 and not Approval.objects.exists()


def test_the_outsider_cannot_reach_another_tenants_repository(
    cast: Cast, api_as: Any, repo: Path, django_capture_on_commit_callbacks: Any
):
    client = api_as(cast.outsider, cast.globex)
    response = invoke(client, "gitops.status", {"repo": "app"}, django_capture_on_commit_callbacks)
    assert response.status_code == 404 and response.json()["error"]["code"] == "git_repo_unknown"
    asked = invoke(client, "gitops.create_branch", {"repo": "app", "branch": "x"}, django_capture_on_commit_callbacks)
    assert asked.status_code == 404 and not Approval.objects.exists()


def test_an_auditor_may_list_but_not_invoke(
    cast: Cast, api_as: Any, repo: Path, django_capture_on_commit_callbacks: Any
):
    client = api_as(cast.auditor)
    assert client.get("/api/v1/catalog/").status_code == 200
    response = invoke(client, "gitops.status", {"repo": "app"}, django_capture_on_commit_callbacks)
    assert response.status_code == 403


# --- human_approval: nothing until approved, then exactly once ------------------------------------------


def test_creating_a_branch_waits_for_approval_then_happens_exactly_once(
    emails: Cast, api_as: Any, browser_as: Any, repo: Path, django_capture_on_commit_callbacks: Any
):
    capture = django_capture_on_commit_callbacks
    first = git(repo, "rev-list", "--max-parents=0", "HEAD")
    asked = invoke(
        api_as(emails.owner), "gitops.create_branch", {"repo": "app", "branch": "hotfix/1", "from": first}, capture
    )
    assert asked.status_code == 202, asked.json()
    approval = asked.json()["approval"]
    assert approval["status"] == "pending" and approval["action"] == "gitops.create_branch"
    assert (approval["target_type"], approval["target_id"]) == ("git_repo", "app")
    assert approval["parameters"] == {
        "repo": "app",
        "branch": "hotfix/1",
        "ref": "refs/heads/hotfix/1",
        "from": first,
        "commit": first,
    }
    assert ref(repo, "refs/heads/hotfix/1") is None  # nothing happens before an approver decides

    approver = browser_as(emails.approver)
    assert approve(approver, "approver@example.test", capture).status_code == 200
    assert ref(repo, "refs/heads/hotfix/1") == first
    row = Approval.objects.get(pk=approval["id"])
    assert (row.status, row.execution) == ("approved", "executed")
    assert row.result == {"repo": "app", "ref": "refs/heads/hotfix/1", "commit": first, "created": True}

    # A redelivered task and a second click do nothing more.
    item = ApprovalExecution.objects.get(approval=row)
    assert execution_run(item_id=item.pk, worker="late") is False
    assert approve(approver, "approver@example.test", capture).status_code == 409
    assert AuditEvent.objects.filter(action="gitops.create_branch", outcome="executed").count() == 1
    assert git(repo, "reflog", "show", "--format=%gs", "refs/heads/hotfix/1").splitlines() == [
        f"tess approval {row.pk}"
    ]


def test_creating_a_tag_after_approval(
    emails: Cast, api_as: Any, browser_as: Any, repo: Path, django_capture_on_commit_callbacks: Any
):
    capture = django_capture_on_commit_callbacks
    head = git(repo, "rev-parse", "HEAD")
    asked = invoke(api_as(emails.owner), "gitops.create_tag", {"repo": "app", "tag": "v1.0.0"}, capture)
    assert asked.status_code == 202 and ref(repo, "refs/tags/v1.0.0") is None
    approve(browser_as(emails.approver), "approver@example.test", capture)
    assert ref(repo, "refs/tags/v1.0.0") == head


def test_a_denied_write_changes_nothing(
    emails: Cast, api_as: Any, browser_as: Any, repo: Path, django_capture_on_commit_callbacks: Any
):
    capture = django_capture_on_commit_callbacks
    invoke(api_as(emails.owner), "gitops.create_branch", {"repo": "app", "branch": "nope"}, capture)
    approver = browser_as(emails.approver)
    token = LINK_RE.findall(str(mail.outbox[-1].body))[0]
    with capture(execute=True):
        approver.post(
            f"/approvals/{token}/",
            {"decision": "deny", "reason": "not now", "csrfmiddlewaretoken": csrf_token(approver)},
        )
    assert ref(repo, "refs/heads/nope") is None


def test_a_branch_name_git_refuses_is_refused_before_anyone_is_asked(
    emails: Cast, api_as: Any, repo: Path, django_capture_on_commit_callbacks: Any
):
    capture = django_capture_on_commit_callbacks
    schema = invoke(api_as(emails.owner), "gitops.create_branch", {"repo": "app", "branch": "-f"}, capture)
    assert schema.status_code == 400 and schema.json()["error"]["details"]["path"] == "/branch"
    git_says = invoke(api_as(emails.owner), "gitops.create_branch", {"repo": "app", "branch": "a..b"}, capture)
    assert git_says.status_code == 400 and git_says.json()["error"]["code"] == "git_ref_invalid"
    exists = invoke(api_as(emails.owner), "gitops.create_branch", {"repo": "app", "branch": "main"}, capture)
    assert exists.status_code == 409 and exists.json()["error"]["code"] == "git_ref_exists"
    assert not Approval.objects.exists() and mail.outbox == []


# --- mos: a hand-off ---------------------------------------------------------------------------------------


def test_a_mos_tool_hands_the_work_to_mos(cast: Cast, api_as: Any, repo: Path, django_capture_on_commit_callbacks: Any):
    response = invoke(
        api_as(cast.owner),
        "gitops.merge_request",
        {"repo": "app", "source": "feature", "target": "main"},
        django_capture_on_commit_callbacks,
    )
    assert response.status_code == 202 and response.json()["status"] == "handed_off"
    handoff = Handoff.objects.get(pk=response.json()["handoff"]["id"])
    assert handoff.payload == {
        "tool": "gitops.merge_request",
        "input": {"repo": "app", "source": "feature", "target": "main"},
    }
    assert handoff.requester == cast.owner


# --- a session's stream notes the call ------------------------------------------------------------------


def test_a_call_made_in_a_session_shows_in_its_stream(
    cast: Cast, api_as: Any, repo: Path, start_session: Any, django_capture_on_commit_callbacks: Any
):
    session = start_session()
    response = invoke(
        api_as(cast.owner), "gitops.status", {"repo": "app"}, django_capture_on_commit_callbacks, session=session
    )
    assert response.status_code == 200
    system = [e.body for e in session.events.filter(kind="system")]
    assert {"text": "Catalog tool gitops.status: done.", "code": "catalog.invoked"} in system


@pytest.mark.parametrize("who", ["teammate", "outsider"])
def test_others_cannot_use_a_tool_in_someone_elses_session(
    cast: Cast, api_as: Any, repo: Path, start_session: Any, django_capture_on_commit_callbacks: Any, who: str
):
    session = start_session()
    client = api_as(getattr(cast, who), cast.globex if who == "outsider" else None)
    response = invoke(client, "gitops.status", {"repo": "app"}, django_capture_on_commit_callbacks, session=session)
    assert response.status_code == 404
    assert not session.events.filter(kind="system").exists()


# --- a turn may ask for the same tool -------------------------------------------------------------------


def test_asking_in_a_turn_to_create_a_branch_requests_the_same_approval(
    emails: Cast, api_as: Any, browser_as: Any, repo: Path, django_capture_on_commit_callbacks: Any
):
    from tests.sessions_app.test_turns import turn

    capture = django_capture_on_commit_callbacks
    session = SessionFactory.create(owner=emails.owner, tenant=emails.acme)
    with capture(execute=True):
        asked = turn(api_as(emails.owner), session, "Tess, create branch from-a-turn in app")
    assert asked.status_code == 200, asked.json()
    body = asked.json()
    assert body["intent"] == "approval" and body["approvals"][0]["action"] == "gitops.create_branch"
    assert ref(repo, "refs/heads/from-a-turn") is None
    approve(browser_as(emails.approver), "approver@example.test", capture)
    assert ref(repo, "refs/heads/from-a-turn") == git(repo, "rev-parse", "HEAD")


def test_a_turn_naming_an_unknown_repository_is_refused_and_nothing_is_asked(
    cast: Cast, api_as: Any, repo: Path, django_capture_on_commit_callbacks: Any
):
    from tests.sessions_app.test_turns import turn

    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    with django_capture_on_commit_callbacks(execute=True):
        refused = turn(api_as(cast.owner), session, "create tag v9 in elsewhere")
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "git_repo_unknown"
    assert not Approval.objects.exists()


# --- TESS_TOOL_POLICY: enforced, not only reported ---------------------------------------------------------


@pytest.fixture
def read_only(settings: Any) -> None:
    settings.TESS_TOOL_POLICY = "read_only"


def test_under_read_only_a_turn_asking_for_a_branch_is_refused_and_nobody_is_asked(
    emails: Cast, api_as: Any, repo: Path, read_only: None, django_capture_on_commit_callbacks: Any
):
    from tests.sessions_app.test_turns import turn

    session = SessionFactory.create(owner=emails.owner, tenant=emails.acme)
    with django_capture_on_commit_callbacks(execute=True):
        refused = turn(api_as(emails.owner), session, "Tess, create branch from-a-turn in app")
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "tool_policy_refused" and "read_only" in error["message"]
    assert error["details"]["policy"] == "read_only" and error["details"]["action"] == "gitops.create_branch"
    assert not Approval.objects.exists() and not ApprovalExecution.objects.exists() and mail.outbox == []
    assert ref(repo, "refs/heads/from-a-turn") is None
    reply = session.events.get(kind="turn.out").body["text"]
    assert reply.startswith("Nothing was done: The tool policy is read_only")
    audit = AuditEvent.objects.get(action="catalog.invoked")
    assert (audit.outcome, audit.metadata["error_code"]) == ("refused", "tool_policy_refused")


def test_under_read_only_terminate_and_mos_turns_are_refused(
    cast: Cast, api_as: Any, repo: Path, read_only: None, django_capture_on_commit_callbacks: Any
):
    from tests.sessions_app.test_turns import turn

    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    client = api_as(cast.owner)
    with django_capture_on_commit_callbacks(execute=True):
        ended = turn(client, session, "terminate this session")
        handed = turn(client, session, "fix the flaky login test")
    assert ended.json()["error"]["details"]["action"] == "session.terminate"
    assert handed.json()["error"]["details"]["authority"] == "mos"
    assert {ended.status_code, handed.status_code} == {403}
    assert not Approval.objects.exists() and not Handoff.objects.exists()


def test_under_read_only_a_mos_tool_is_refused_with_the_policy_named(
    cast: Cast, api_as: Any, repo: Path, read_only: None, django_capture_on_commit_callbacks: Any
):
    response = invoke(
        api_as(cast.owner),
        "gitops.merge_request",
        {"repo": "app", "source": "feature", "target": "main"},
        django_capture_on_commit_callbacks,
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "tool_policy_refused"
    assert response.json()["error"]["details"]["tool"] == "gitops.merge_request"
    assert not Handoff.objects.exists()


def test_under_read_only_a_read_only_tool_still_runs(
    cast: Cast, api_as: Any, repo: Path, read_only: None, django_capture_on_commit_callbacks: Any
):
    response = invoke(api_as(cast.owner), "gitops.branches", {"repo": "app"}, django_capture_on_commit_callbacks)
    assert response.status_code == 200 and response.json()["status"] == "done"


def test_the_catalog_says_which_tools_the_policy_allows(cast: Cast, api_as: Any, repo: Path, settings: Any):
    def allowed() -> dict[str, bool]:
        listed = api_as(cast.owner).get("/api/v1/catalog/").json()["results"]
        return {e["id"]: e["allowed_by_policy"] for e in listed}

    assert all(allowed().values())  # the default policy, approval_required, lets every authority through
    settings.TESS_TOOL_POLICY = "read_only"
    under_read_only = allowed()
    assert under_read_only["gitops.status"] and under_read_only["diagnostics.provider_health"]
    assert not under_read_only["gitops.create_branch"] and not under_read_only["gitops.merge_request"]
    assert not under_read_only["bootstrap.start"]
