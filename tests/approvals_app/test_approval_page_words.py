"""The approval page says in words what approving does, with the requester's reason, the session's last
output as plain text and the time left; the approver decides with the admin's own buttons."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.utils import timezone

from approvals_app.models import Approval
from sessions_app import services
from sessions_app.stream import EventKind, output_body
from sessions_app.terminate import terminate_request
from tests.approvals_app.approval_fixtures import token_of
from tests.conftest import scope_of
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db

HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b[2J"


@pytest.fixture
def terminate(mailed, settings, django_capture_on_commit_callbacks):
    settings.TESS_RUNTIME_PROVIDERS = {"demo": {"kind": "tmux", "socket": "demo.sock"}}
    session = SessionFactory.create(
        owner=mailed.owner,
        tenant=mailed.acme,
        title="demo",
        provider_instance="demo",
        created_at=timezone.now() - timedelta(hours=2, minutes=5),
    )
    data = "".join(f"\x1b[32mline {i}\x1b[0m\r\n" for i in range(1, 31)) + HOSTILE + "progress 10%\rprogress 100%\r\n"
    services.event_append(
        session_id=session.pk,
        kind=EventKind.OUTPUT,
        body=output_body(data=data, source="%0", cursor="%0:0", next_cursor=f"%0:{len(data)}"),
    )
    with django_capture_on_commit_callbacks(execute=True):
        approval = terminate_request(
            scope=scope_of(mailed.owner, mailed.acme), session=session, reason="stuck in a loop"
        )
    return approval


def test_the_page_says_what_will_happen_in_words(mailed, terminate, browser_as):
    html = browser_as(mailed.approver).get(f"/approvals/{token_of(mailed.approver)}/").content.decode()
    assert "Terminate the session \u201cdemo\u201d (tmux instance demo), started by owner 2\xa0hours ago" in html
    assert "stuck in a loop" in html
    assert "Time left to decide" in html and " min " in html and " s left" in html


def test_the_page_shows_the_last_20_lines_of_output_without_escape_codes(mailed, terminate, browser_as):
    html = browser_as(mailed.approver).get(f"/approvals/{token_of(mailed.approver)}/").content.decode()
    assert "The last 20 lines of the session\u2019s output" in html
    block = html.split('data-field="output"', 1)[1].split("</pre>", 1)[0]
    lines = block.split(">", 1)[1].strip("\n").split("\n")
    assert len(lines) == 20
    assert lines[0] == "line 12" and lines[-2] == "line 30" and lines[-1] == "progress 100%"
    assert "\x1b" not in html and "ZXZpbA" not in html and "[32m" not in html


def test_approve_is_the_primary_button_and_deny_asks_for_a_reason(mailed, terminate, browser_as):
    html = browser_as(mailed.approver).get(f"/approvals/{token_of(mailed.approver)}/").content.decode()
    assert '<input type="submit" class="default" value="Approve">' in html
    deny = html.split('class="tess-deny"', 1)[1].split("</form>", 1)[0]
    assert 'name="reason"' in deny and "required" in deny and 'value="Deny"' in deny


def test_someone_elses_link_shows_none_of_it(mailed, terminate, browser_as):
    response = browser_as(mailed.teammate).get(f"/approvals/{token_of(mailed.approver)}/")
    assert response.status_code == 403
    html = response.content.decode()
    assert "line 30" not in html and "stuck in a loop" not in html and "Terminate the session" not in html
    assert Approval.objects.get(pk=terminate.pk).status == "pending"


def test_every_admin_page_is_branded_tess_with_its_icon(mailed, terminate, browser_as, client):
    for response in (
        client.get("/admin/login/"),
        browser_as(mailed.approver).get("/admin/"),
        browser_as(mailed.approver).get(f"/approvals/{token_of(mailed.approver)}/"),
    ):
        html = response.content.decode()
        assert '<div id="site-name"><a href="/admin/">Tess</a></div>' in html
        assert "| Tess</title>" in html and "Django" not in html.split("</title>")[0]
        assert 'rel="icon" href="/static/tess/favicon.svg" type="image/svg+xml"' in html
    icon = finders.find("tess/favicon.svg")
    assert icon is not None and "<svg" in Path(icon).read_text()
