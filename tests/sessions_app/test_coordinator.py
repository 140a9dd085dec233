"""The session coordinator against real tmux servers: start, pump, send, attach, terminate, isolation."""

from __future__ import annotations

import itertools
import threading

import pytest
from django.db import connection
from django.utils.dateparse import parse_datetime

from providers_app.contract import AttachmentRequired, RuntimeNotFound
from providers_app.registry import get_provider
from sessions_app import services
from sessions_app.models import AttachMode, InboxItem, Session, SessionStatus
from tess_site.errors import Conflict, Forbidden, NotFound
from tess_site.leases import LeaseState
from tests.conftest import scope_of
from tests.waiting import wait_for

from .conftest import output_of, pump_until

pytestmark = pytest.mark.django_db


def _send(cast, session, text, capture, user=None):
    scope = scope_of(user or cast.owner, cast.acme)
    with capture(execute=True):
        return services.message_enqueue(scope=scope, session_id=session.pk, text=text)


def test_starting_runs_the_configured_command_and_binds_the_runtime_to_the_caller(cast, tmux, start_session):
    session = start_session(title="build")
    assert session.owner == cast.owner and session.status == SessionStatus.RUNNING
    assert session.runtime_id.startswith("$")
    assert session.runtime_identity["socket"] == str(tmux.socket)
    assert "sh" in tmux.tmux("list-panes", "-t", session.runtime_id, "-F", "#{pane_current_command}")
    assert [e.kind for e in session.events.all()] == ["status"]


def test_a_session_can_only_be_started_by_an_operator(cast, tmux):
    with pytest.raises(Forbidden):
        services.session_start(scope=scope_of(cast.auditor, cast.acme), instance="alpha", title="x")


def test_an_unknown_instance_is_not_found(cast, tmux):
    with pytest.raises(NotFound):
        services.session_start(scope=scope_of(cast.owner, cast.acme), instance="nope", title="x")


def test_a_message_is_typed_once_and_recorded_as_message_in(cast, start_session, django_capture_on_commit_callbacks):
    session = start_session()
    services.session_attach(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, mode=AttachMode.INTERACTIVE)
    item = _send(cast, session, "hello tess", django_capture_on_commit_callbacks)
    item.refresh_from_db()
    assert item.state == LeaseState.DONE
    output = pump_until(session, "got:hello tess")
    assert output.count("got:hello tess") == 1
    message = session.events.get(kind="message.in")
    assert message.body == {"inbox_id": item.pk, "text": "hello tess", "channel": "web"}
    assert item.delivered_seq == message.seq


def test_a_read_only_attachment_refuses_raw_input(cast, start_session):
    session = start_session()
    services.session_attach(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, mode=AttachMode.READ_ONLY)
    with pytest.raises(AttachmentRequired):
        services.message_enqueue(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, text="ls")
    assert not InboxItem.objects.exists()


def test_without_any_attachment_raw_input_is_refused(cast, start_session):
    session = start_session()
    with pytest.raises(AttachmentRequired):
        services.message_enqueue(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, text="ls")


def test_a_detached_attachment_no_longer_allows_input(cast, start_session):
    session = start_session()
    scope = scope_of(cast.owner, cast.acme)
    services.session_attach(scope=scope, session_id=session.pk, mode=AttachMode.INTERACTIVE)
    assert services.session_detach(scope=scope, session_id=session.pk) == 1
    with pytest.raises(AttachmentRequired):
        services.message_enqueue(scope=scope, session_id=session.pk, text="ls")


def test_an_idle_attachment_expires(cast, start_session, settings):
    session = start_session()
    scope = scope_of(cast.owner, cast.acme)
    attachment = services.session_attach(scope=scope, session_id=session.pk, mode=AttachMode.INTERACTIVE)
    from datetime import timedelta

    from django.utils import timezone

    type(attachment).objects.filter(pk=attachment.pk).update(
        last_activity_at=timezone.now() - timedelta(seconds=settings.TESS_ATTACH_IDLE_SECONDS + 1)
    )
    with pytest.raises(AttachmentRequired):
        services.message_enqueue(scope=scope, session_id=session.pk, text="ls")


def test_a_viewer_grant_cannot_attach_interactively(cast, start_session):
    session = start_session()
    services.session_grant(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, grantee=cast.teammate)
    with pytest.raises(Forbidden):
        services.session_attach(
            scope=scope_of(cast.teammate, cast.acme), session_id=session.pk, mode=AttachMode.INTERACTIVE
        )
    services.session_attach(scope=scope_of(cast.teammate, cast.acme), session_id=session.pk, mode=AttachMode.READ_ONLY)


def test_asking_to_terminate_only_creates_an_approval_and_the_runtime_lives_on(cast, tmux, start_session):
    session = start_session()
    approval = services.session_terminate(scope=scope_of(cast.owner, cast.acme), session_id=session.pk)
    assert (approval.action, approval.target_id, approval.status) == ("session.terminate", str(session.pk), "pending")
    assert session.runtime_id in tmux.tmux("list-sessions", "-F", "#{session_id}").split()
    session.refresh_from_db()
    assert session.status == SessionStatus.RUNNING
    assert list(session.events.filter(kind="approval").values_list("body", flat=True)) == [
        {"id": str(approval.pk), "status": "pending"}
    ]


def test_the_stream_cursor_is_exact_across_pumps(cast, start_session, django_capture_on_commit_callbacks):
    session = start_session()
    services.session_attach(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, mode=AttachMode.INTERACTIVE)
    for i in range(5):
        _send(cast, session, f"line-{i}", django_capture_on_commit_callbacks)
        pump_until(session, f"got:line-{i}")
    output = output_of(session)
    for i in range(5):
        assert output.count(f"got:line-{i}") == 1
    assert output.index("got:line-0") < output.index("got:line-4")
    # One pane: each output event starts exactly where the one before ended, from byte 0 on.
    bodies = [e.body for e in session.events.filter(kind="output").order_by("seq")]
    assert bodies[0]["cursor"].endswith(":0")
    for before, after in itertools.pairwise(bodies):
        assert after["cursor"] == before["next_cursor"]
    session.refresh_from_db()
    assert session.cursor == bodies[-1]["next_cursor"]
    last_seq = session.last_seq
    assert services.session_pump(session_id=session.pk) == 0  # nothing new: nothing written
    session.refresh_from_db()
    assert session.last_seq == last_seq


def test_output_read_from_the_stored_cursor_starts_after_everything_pumped(cast, start_session, tmux):
    session = start_session()
    tmux.tmux("send-keys", "-t", session.runtime_id, "-l", "first")
    tmux.tmux("send-keys", "-t", session.runtime_id, "Enter")
    pump_until(session, "got:first")
    session.refresh_from_db()
    provider = get_provider("alpha")
    page = provider.stream_session(session.runtime_ref, session.cursor, services.system_scope(session))
    assert "".join(c.data for c in page.chunks) == ""


def test_a_runtime_that_exits_ends_the_session_with_a_status_event(cast, start_session, tmux):
    session = start_session()
    tmux.tmux("kill-session", "-t", session.runtime_id)

    def ended() -> bool:
        services.session_pump(session_id=session.pk)
        session.refresh_from_db()
        return session.status == SessionStatus.EXITED

    assert wait_for(ended, timeout=30)
    body = session.events.order_by("-seq").first().body
    assert (body["status"], body["agent_state"]) == ("exited", "ended")
    assert (session.agent_state, parse_datetime(body["since"])) == ("ended", session.agent_state_since)


def test_two_named_instances_of_one_kind_are_isolated(cast, tmux_pair):
    alpha, _beta = tmux_pair
    scope = scope_of(cast.owner, cast.acme)
    on_alpha = services.session_start(scope=scope, instance="alpha", title="a")
    on_beta = services.session_start(scope=scope, instance="beta", title="b")
    alpha_ids = [r.ref.runtime_id for r in get_provider("alpha").list_sessions(scope)]
    beta_ids = [r.ref.runtime_id for r in get_provider("beta").list_sessions(scope)]
    assert alpha_ids == [on_alpha.runtime_id] and beta_ids == [on_beta.runtime_id]
    # tmux numbers sessions per server: both are "$0", and still never confused.
    assert on_alpha.runtime_id == on_beta.runtime_id
    with pytest.raises(RuntimeNotFound):
        get_provider("alpha").stream_session(on_beta.runtime_ref, None, scope)
    services.session_attach(scope=scope, session_id=on_beta.pk, mode=AttachMode.INTERACTIVE)
    get_provider("beta").send_message(on_beta.runtime_ref, "only-beta", "k1", scope)
    pump_until(on_beta, "got:only-beta")
    services.session_pump(session_id=on_alpha.pk)
    assert "only-beta" not in output_of(on_alpha)
    assert "only-beta" not in alpha.tmux("capture-pane", "-p", "-t", on_alpha.runtime_id)


def test_adopting_needs_a_tenant_admin_and_a_discovered_runtime(cast, tmux):
    tmux.tmux("new-session", "-d", "-s", "stray", "sh")
    admin = scope_of(cast.admin_user, cast.acme)
    found = services.runtime_discovered(scope=admin)
    assert [r.title for r in found] == ["stray"]
    with pytest.raises(Forbidden):
        services.runtime_discovered(scope=scope_of(cast.owner, cast.acme))
    with pytest.raises(Forbidden):
        services.session_adopt(
            scope=scope_of(cast.owner, cast.acme),
            instance="alpha",
            runtime_id=found[0].ref.runtime_id,
            assignee="owner",
        )
    session = services.session_adopt(
        scope=admin, instance="alpha", runtime_id=found[0].ref.runtime_id, assignee="owner", title="stray"
    )
    assert session.owner == cast.owner
    assert services.runtime_discovered(scope=admin) == []  # bound now: no longer discovered
    with pytest.raises(Conflict):
        services.session_adopt(scope=admin, instance="alpha", runtime_id=session.runtime_id, assignee="owner")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_pumps_never_write_the_same_output_twice(cast, start_session, tmux):
    session = start_session()
    for i in range(20):
        tmux.tmux("send-keys", "-t", session.runtime_id, "-l", f"n{i}")
        tmux.tmux("send-keys", "-t", session.runtime_id, "Enter")
    barrier = threading.Barrier(4)

    def pump() -> None:
        try:
            barrier.wait()
            for _ in range(20):
                services.session_pump(session_id=session.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=pump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    output = pump_until(session, "got:n19")
    for i in range(20):
        assert output.count(f"got:n{i}\r") == 1, output
    seqs = list(Session.objects.get(pk=session.pk).events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
