"""The sessions REST API for the CLI, against a real tmux server."""

from __future__ import annotations

import uuid

import pytest

from sessions_app import services
from sessions_app.models import AttachMode, InboxItem, RuntimeAttachment, Session
from sessions_app.stream import EventKind, system_body
from tests.conftest import scope_of
from tests.waiting import wait_for

from .conftest import pump_until

pytestmark = pytest.mark.django_db

ROUTES = ["", "tree/", "events/", "screen/"]
POSTS = ["messages/", "attach/", "detach/", "terminate/"]


def post(client, url, data=None, key=None):
    return client.post(url, data or {}, format="json", HTTP_IDEMPOTENCY_KEY=key or uuid.uuid4().hex)


def url(session, tail=""):
    return f"/api/v1/sessions/{session.pk}/{tail}"


def test_the_list_shows_own_sessions_in_few_queries(cast, api_as, start_session, django_assert_max_num_queries):
    mine = [start_session(title=f"s{i}") for i in range(3)]
    start_session(user=cast.teammate, title="theirs")
    client = api_as(cast.owner)
    with django_assert_max_num_queries(5):
        response = client.get("/api/v1/sessions/")
    assert response.status_code == 200
    body = response.json()["results"]
    assert {s["id"] for s in body} == {str(s.pk) for s in mine}
    assert set(body[0]) == {
        "id",
        "title",
        "status",
        "agent_state",
        "agent_state_since",
        "owner",
        "provider",
        "runtime_id",
        "workspace_key",
        "last_seq",
        "created_at",
        "updated_at",
    }


def test_the_list_and_the_detail_show_the_agent_state_the_pump_announced(cast, api_as, start_session):
    session = start_session()
    client = api_as(cast.owner)
    assert client.get(url(session)).json()["agent_state"] == "unknown"

    def idle():
        services.session_pump(session_id=session.pk)
        session.refresh_from_db()
        return session.agent_state == "idle"  # the echo loop's shell waits quietly for a line

    assert wait_for(idle, timeout=30)
    since = session.agent_state_since.isoformat().replace("+00:00", "Z")
    listed = client.get("/api/v1/sessions/").json()["results"][0]
    assert (listed["agent_state"], listed["agent_state_since"]) == ("idle", since)
    detail = client.get(url(session)).json()
    assert (detail["agent_state"], detail["agent_state_since"]) == ("idle", since)


def test_the_list_query_count_does_not_grow_with_sessions(cast, api_as, start_session, django_assert_max_num_queries):
    for i in range(6):
        start_session(title=f"s{i}")
    client = api_as(cast.owner)
    with django_assert_max_num_queries(5):
        assert len(client.get("/api/v1/sessions/").json()["results"]) == 6


def test_granted_sessions_are_listed_for_the_grantee(cast, api_as, start_session):
    session = start_session()
    services.session_grant(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, grantee=cast.teammate)
    body = api_as(cast.teammate).get("/api/v1/sessions/").json()["results"]
    assert [s["id"] for s in body] == [str(session.pk)]
    assert api_as(cast.teammate).get(url(session)).status_code == 200


@pytest.mark.parametrize("who", ["teammate", "outsider"])
def test_other_people_get_404_on_every_route(cast, api_as, start_session, who):
    session = start_session()
    user = getattr(cast, who)
    client = api_as(user, cast.globex if who == "outsider" else cast.acme)
    for tail in ROUTES:
        response = client.get(url(session, tail))
        assert response.status_code == 404, (tail, response.json())
        assert response.json()["error"]["code"] == "not_found"
    for tail in POSTS:
        response = post(client, url(session, tail), {"text": "rm -rf /", "mode": "interactive"})
        assert response.status_code == 404, (tail, response.json())
    assert client.get("/api/v1/sessions/").json()["results"] == []
    assert not InboxItem.objects.exists()
    assert not RuntimeAttachment.objects.exists()


def test_an_unknown_or_malformed_id_is_404_like_a_foreign_one(cast, api_as, tmux):
    client = api_as(cast.owner)
    assert client.get(f"/api/v1/sessions/{uuid.uuid4()}/").status_code == 404
    assert client.get("/api/v1/sessions/not-a-uuid/events/").status_code == 404


def test_detail_shows_the_callers_attachment(cast, api_as, start_session):
    session = start_session()
    client = api_as(cast.owner)
    assert client.get(url(session)).json()["attachment"] is None
    assert post(client, url(session, "attach/"), {"mode": "interactive"}).status_code == 200
    body = client.get(url(session)).json()
    assert body["attachment"]["mode"] == "interactive"
    assert body["provider"] == "alpha" and body["owner"] == "owner"
    assert "runtime_identity" not in body and "cursor" not in body


def test_attach_defaults_to_read_only(cast, api_as, start_session):
    session = start_session()
    response = post(api_as(cast.owner), url(session, "attach/"))
    assert response.status_code == 200
    assert response.json()["mode"] == "read_only"


def test_the_tree_is_session_windows_panes(cast, api_as, start_session):
    session = start_session()
    body = api_as(cast.owner).get(url(session, "tree/")).json()
    (root,) = body["nodes"]
    assert root["id"] == session.runtime_id and root["kind"] == "session"
    (window,) = root["children"]
    assert window["kind"] == "window" and window["id"].startswith("@")
    (pane,) = window["children"]
    assert pane["kind"] == "pane" and pane["id"].startswith("%") and pane["children"] == []


def test_events_page_by_cursor(cast, api_as, start_session):
    session = start_session()
    for i in range(5):
        services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text=f"line {i}"))
    client = api_as(cast.owner)
    first = client.get(url(session, "events/"), {"cursor": 0, "limit": 4}).json()
    assert [e["seq"] for e in first["events"]] == [1, 2, 3, 4]
    assert set(first["events"][0]) == {"seq", "kind", "ts", "body"}
    rest = client.get(url(session, "events/"), {"cursor": first["next_cursor"]}).json()
    assert [e["seq"] for e in rest["events"]] == [5, 6]
    assert rest["last_seq"] == 6
    assert client.get(url(session, "events/"), {"cursor": -1}).status_code == 400
    assert client.get(url(session, "events/"), {"limit": 5000}).status_code == 400


def test_a_message_through_the_api_reaches_the_runtime(cast, api_as, start_session, django_capture_on_commit_callbacks):
    session = start_session()
    client = api_as(cast.owner)
    post(client, url(session, "attach/"), {"mode": "interactive"})
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, url(session, "messages/"), {"text": "from the cli"})
    assert response.status_code == 202, response.json()
    assert response.json()["state"] == "pending"
    assert pump_until(session, "got:from the cli").count("got:from the cli") == 1


def test_a_message_without_an_interactive_attachment_is_a_typed_error(cast, api_as, start_session):
    session = start_session()
    client = api_as(cast.owner)
    post(client, url(session, "attach/"), {"mode": "read_only"})
    response = post(client, url(session, "messages/"), {"text": "ls"})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "interactive_attachment_required"


def test_terminate_answers_202_with_a_pending_approval_and_kills_nothing(cast, api_as, start_session, tmux):
    session = start_session()
    response = post(api_as(cast.owner), url(session, "terminate/"), {"reason": "runaway loop"})
    assert response.status_code == 202
    body = response.json()
    assert (body["action"], body["target_type"], body["target_id"]) == ("session.terminate", "session", str(session.pk))
    assert body["status"] == "pending" and body["requester"] == "owner" and body["reason"] == "runaway loop"
    assert body["parameters"] == {"provider": "alpha", "runtime_id": session.runtime_id}
    assert session.runtime_id in tmux.tmux("list-sessions", "-F", "#{session_id}").split()


def test_creating_a_session_names_an_instance_and_a_title_never_a_command(cast, api_as, tmux):
    client = api_as(cast.owner)
    response = post(client, "/api/v1/sessions/", {"provider": "alpha", "title": "new work"})
    assert response.status_code == 201, response.json()
    session = Session.objects.get(pk=response.json()["id"])
    assert session.owner == cast.owner
    assert session.runtime_id in tmux.tmux("list-sessions", "-F", "#{session_id}").split()
    # A command in the body is not a field: it is ignored, never run.
    response = post(client, "/api/v1/sessions/", {"provider": "alpha", "title": "x", "command": "touch /tmp/pwned"})
    assert Session.objects.get(pk=response.json()["id"]).runtime_id


def test_creating_with_an_identity_field_is_refused(cast, api_as, tmux):
    response = post(api_as(cast.owner), "/api/v1/sessions/", {"provider": "alpha", "title": "x", "owner": 1})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "identity_field_forbidden"


def test_tenant_admins_see_and_adopt_discovered_runtimes_for_an_assignee(cast, api_as, tmux):
    tmux.tmux("new-session", "-d", "-s", "stray", "sh")
    admin = api_as(cast.admin_user)
    found = admin.get("/api/v1/sessions/discovered/").json()["results"]
    assert [(r["provider"], r["title"]) for r in found] == [("alpha", "stray")]
    assert api_as(cast.owner).get("/api/v1/sessions/discovered/").status_code == 403
    response = post(
        admin, "/api/v1/sessions/", {"provider": "alpha", "runtime_id": found[0]["runtime_id"], "assignee": "owner"}
    )
    assert response.status_code == 201, response.json()
    assert response.json()["owner"] == "owner"
    assert [s["id"] for s in api_as(cast.owner).get("/api/v1/sessions/").json()["results"]] == [response.json()["id"]]


def test_operators_cannot_adopt(cast, api_as, tmux):
    tmux.tmux("new-session", "-d", "-s", "stray", "sh")
    runtime_id = tmux.tmux("list-sessions", "-F", "#{session_id}").split()[0]
    response = post(
        api_as(cast.owner), "/api/v1/sessions/", {"provider": "alpha", "runtime_id": runtime_id, "assignee": "owner"}
    )
    assert response.status_code == 403
    assert not Session.objects.exists()


def test_an_outsider_admin_cannot_adopt_for_another_tenants_operator(cast, api_as, tmux):
    tmux.tmux("new-session", "-d", "-s", "stray", "sh")
    runtime_id = tmux.tmux("list-sessions", "-F", "#{session_id}").split()[0]
    response = post(
        api_as(cast.outsider, cast.globex),
        "/api/v1/sessions/",
        {"provider": "alpha", "runtime_id": runtime_id, "assignee": "owner"},
    )
    assert response.status_code == 400
    assert not Session.objects.exists()


def test_the_openapi_description_documents_every_event_kind(cast, api_as, tmux):
    schema = api_as(cast.owner).get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    for kind in EventKind:
        assert f"`{kind.value}`" in schema


def test_attaching_interactive_after_read_only_replaces_the_attachment(cast, api_as, start_session):
    session = start_session()
    client = api_as(cast.owner)
    post(client, url(session, "attach/"), {"mode": "read_only"})
    post(client, url(session, "attach/"), {"mode": "interactive"})
    live = RuntimeAttachment.objects.filter(session=session, detached_at=None)
    assert [a.mode for a in live] == [AttachMode.INTERACTIVE]


def test_the_list_filters_by_state_provider_owner_and_title(cast, api_as):
    from guardian.shortcuts import assign_perm

    from tests.factories import SessionFactory

    SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="Build API", agent_state="waiting_for_input")
    SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="docs", provider_instance="beta")
    shared = SessionFactory.create(owner=cast.teammate, tenant=cast.acme, title="shared build")
    assign_perm("view_session", cast.owner, shared)
    SessionFactory.create(owner=cast.teammate, tenant=cast.acme, title="hidden build")
    client = api_as(cast.owner)

    def titles(query: str) -> list[str]:
        response = client.get(f"/api/v1/sessions/?{query}")
        assert response.status_code == 200, response.content
        return sorted(row["title"] for row in response.json()["results"])

    assert titles("q=BUILD") == ["Build API", "shared build"]
    assert titles("agent_state=waiting_for_input") == ["Build API"]
    assert titles("provider=beta") == ["docs"]
    assert titles("owned_by=teammate") == ["shared build"]
    assert titles("owned_by=teammate&q=hidden") == []


@pytest.mark.parametrize("query", ["agent_state=sleeping", "provider=a%20b", "owned_by=x%3By", "q=" + "x" * 201])
def test_a_malformed_list_filter_is_a_typed_400(cast, api_as, query):
    response = api_as(cast.owner).get(f"/api/v1/sessions/?{query}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"
