"""The CLI against a live server: login and its config file, tables and JSON, exit codes, errors."""

from __future__ import annotations

import json
import stat

import pytest

from approvals_app.models import Approval
from sessions_app.models import SessionEvent
from tests.factories import SessionFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_login_exchanges_the_password_and_stores_the_token_owner_only(cast, tess):
    tess.login("owner")
    path = tess.home / "tess" / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = json.loads(path.read_text())
    assert stored["token"] and stored["username"] == "owner" and stored["tenant"] == "acme"
    me = tess("whoami", "--json")
    assert me.returncode == 0
    assert json.loads(me.stdout)["username"] == "owner"
    assert "owner" in tess("whoami").stdout


def test_login_accepts_a_pasted_token(cast, tess, token_for):
    done = tess("login", "--token-stdin", stdin=token_for(cast.owner) + "\n")
    assert done.returncode == 0, done.stderr
    assert "as owner (acme)" in done.stdout


def test_a_wrong_password_is_an_auth_error(cast, tess):
    done = tess("login", "--username", "owner", "--password-stdin", stdin="nope\n")
    assert done.returncode == 3
    assert "username or password is wrong" in done.stderr
    assert "Traceback" not in done.stderr


def test_commands_without_login_say_so(cast, tess):
    done = tess("sessions", "list")
    assert done.returncode == 3
    assert "tess login" in done.stderr


def test_a_refused_token_is_an_auth_error(cast, tess):
    done = tess("whoami", TESS_TOKEN="tess_not_a_real_token")
    assert done.returncode == 3
    assert "HTTP 401" in done.stderr


def test_an_unreachable_server_is_a_network_error(cast, tess, token_for):
    from tests.tess_site.children import free_port

    done = tess("whoami", TESS_TOKEN=token_for(cast.owner), TESS_URL=f"http://127.0.0.1:{free_port()}")
    assert done.returncode == 6
    assert "Cannot reach" in done.stderr and "Traceback" not in done.stderr


def test_sessions_list_shows_a_table_and_json_of_the_callers_sessions(cast, tess):
    mine = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="mine", agent_state="waiting_for_input")
    theirs = SessionFactory.create(owner=cast.teammate, tenant=cast.acme, title="theirs")
    tess.login("owner")
    table = tess("sessions", "list")
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split()[:4] == ["ID", "TITLE", "STATUS", "AGENT_STATE"]
    assert table.stdout.splitlines()[1].split()[1:4] == ["mine", "running", "waiting_for_input"]
    assert "mine" in table.stdout and "theirs" not in table.stdout
    rows = json.loads(tess("sessions", "list", "--json").stdout)
    assert [r["id"] for r in rows] == [str(mine.pk)]
    assert (rows[0]["agent_state"], rows[0]["agent_state_since"]) == ("waiting_for_input", None)
    assert "mine" in tess("sessions", "show", str(mine.pk)).stdout
    refused = tess("sessions", "show", str(theirs.pk))
    assert refused.returncode == 4 and "No such session" in refused.stderr


def test_outsiders_cannot_reach_the_owners_session(cast, tess):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    tess.login("outsider")
    assert tess("sessions", "show", str(session.pk)).returncode == 4
    assert tess("ask", str(session.pk), "hello").returncode == 4
    assert not SessionEvent.objects.filter(session=session).exists()


def test_ask_takes_a_turn_and_prints_the_reply(cast, tess):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    tess.login("owner")
    done = tess("ask", str(session.pk), "hello tess", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    turn_in = SessionEvent.objects.get(session=session, kind="turn.in")
    assert turn_in.body["channel"] == "cli" and turn_in.body["text"] == "hello tess"
    assert body["reply"] == SessionEvent.objects.get(session=session, kind="turn.out").body["text"]


def test_send_without_an_interactive_attachment_is_refused(cast, tess):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    tess.login("owner")
    done = tess("send", str(session.pk), "ls")
    assert done.returncode in (4, 5)
    assert "Traceback" not in done.stderr


def test_terminate_shows_the_pending_approval_and_waits_for_its_outcome(cast, tess):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    tess.login("owner")
    waiting = tess.popen("terminate", str(session.pk), "--reason", "done", "--wait")
    try:
        assert waiting.stdout is not None
        first = waiting.stdout.readline()
        assert "is pending" in first
        # An approver decides (the one-time page is tested with approvals); the CLI sees the outcome.
        Approval.objects.filter(session_id=session.pk).update(status=Approval.Status.DENIED)
        out, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
    assert "is denied" in out
    assert "waiting for an approver" in err
    assert waiting.returncode == 5


def test_approvals_and_handoffs_list(cast, tess):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    tess.login("owner")
    assert tess("terminate", str(session.pk)).returncode == 0
    listed = tess("approvals", "list")
    assert (listed.returncode == 0 and "session.terminate" in listed.stdout) or "terminate" in listed.stdout
    assert len(json.loads(tess("approvals", "list", "--json", "--status", "pending").stdout)) == 1
    handoffs = tess("handoffs", "list", "--json")
    assert handoffs.returncode == 0 and json.loads(handoffs.stdout) == []


def test_memory_forget_all_needs_confirmation_in_scripts(cast, tess):
    tess.login("owner")
    assert tess("memory", "list").returncode == 0
    refused = tess("memory", "forget-all")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    done = tess("memory", "forget-all", "--yes", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["deleted_count"] == 0


def test_link_code_prints_a_one_time_code(cast, tess):
    tess.login("owner")
    done = tess("link-code")
    assert done.returncode == 0 and "/tess link " in done.stdout
