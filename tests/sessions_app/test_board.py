"""The fleet board's reads: who sees which session, the filters, the counts, and a fixed number of queries."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from guardian.shortcuts import assign_perm

from approvals_app.models import Approval, Card, Handoff
from sessions_app.board import BoardFilters, board_page, board_row_of, board_sessions
from sessions_app.models import Session
from tests.conftest import Cast, scope_of
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db


def _titles(rows: Any) -> list[str]:
    return sorted(session.title for session in rows)


def _pending_for(session: Session, requester: Any) -> None:
    sid = str(session.pk)
    Card.objects.create(tenant=session.tenant, owner=requester, kind="memory", session_id=sid, correlation_id="c")
    Card.objects.create(
        tenant=session.tenant, owner=requester, kind="memory", session_id=sid, correlation_id="c", status="dismissed"
    )
    for status in ("pending", "pending", "denied"):
        Approval.objects.create(
            tenant=session.tenant,
            requester=requester,
            action="session.terminate",
            target_type="session",
            target_id=sid,
            session_id=sid,
            channel="web",
            correlation_id="c",
            status=status,
            expires_at=timezone.now() + timedelta(hours=1),
        )
    for status in ("queued", "completed"):
        Handoff.objects.create(
            tenant=session.tenant, requester=requester, session_id=sid, correlation_id="c", summary="s", status=status
        )


def test_the_board_lists_own_and_granted_sessions_and_nobody_elses(cast: Cast) -> None:
    SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="mine")
    granted = SessionFactory.create(owner=cast.teammate, tenant=cast.acme, title="granted")
    SessionFactory.create(owner=cast.teammate, tenant=cast.acme, title="teammate's")
    SessionFactory.create(owner=cast.outsider, tenant=cast.globex, title="other tenant")
    assign_perm("view_session", cast.owner, granted)

    assert _titles(board_sessions(scope=scope_of(cast.owner, cast.acme))) == ["granted", "mine"]
    assert _titles(board_sessions(scope=scope_of(cast.outsider, cast.acme))) == []
    assert _titles(board_sessions(scope=scope_of(cast.outsider, cast.globex))) == ["other tenant"]
    # The tenant admin sees only what is theirs or granted, as everywhere else on the board.
    assert _titles(board_sessions(scope=scope_of(cast.admin_user, cast.acme))) == []


def test_a_row_is_read_through_the_viewers_rule(cast: Cast) -> None:
    theirs = SessionFactory.create(owner=cast.teammate, tenant=cast.acme, title="theirs")
    assert board_row_of(scope=scope_of(cast.owner, cast.acme), session_id=theirs.pk) is None
    assert board_row_of(scope=scope_of(cast.outsider, cast.globex), session_id=theirs.pk) is None
    row = board_row_of(scope=scope_of(cast.teammate, cast.acme), session_id=theirs.pk)
    assert row is not None and row["title"] == "theirs" and row["owner"] == "teammate"


def test_the_counts_are_of_pending_items_the_viewer_may_see(cast: Cast) -> None:
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="busy")
    assign_perm("view_session", cast.teammate, session)
    _pending_for(session, cast.owner)

    row = board_row_of(scope=scope_of(cast.owner, cast.acme), session_id=session.pk)
    assert row is not None
    assert (row["pending_cards"], row["pending_approvals"], row["pending_handoffs"]) == (1, 2, 1)
    # A viewer granted the session does not learn of the owner's cards, approvals or hand-offs through it.
    other = board_row_of(scope=scope_of(cast.teammate, cast.acme), session_id=session.pk)
    assert other is not None
    assert (other["pending_cards"], other["pending_approvals"], other["pending_handoffs"]) == (0, 0, 0)


def test_filters_narrow_and_ended_sessions_are_hidden_unless_asked(cast: Cast) -> None:
    SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="Build API", agent_state="waiting_for_input")
    SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="docs", provider_instance="beta")
    SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="old build", status="exited", agent_state="ended")
    shared = SessionFactory.create(owner=cast.teammate, tenant=cast.acme, title="shared")
    assign_perm("view_session", cast.owner, shared)
    scope = scope_of(cast.owner, cast.acme)

    def titles(**given: Any) -> list[str]:
        return _titles(board_page(scope=scope, filters=BoardFilters(**given), number=1).object_list)

    assert titles(ended=False) == ["Build API", "docs", "shared"]
    assert titles(ended=True) == ["Build API", "docs", "old build", "shared"]
    assert titles(ended=True, q="build") == ["Build API", "old build"]
    assert titles(agent_state="waiting_for_input") == ["Build API"]
    assert titles(provider="beta") == ["docs"]
    assert titles(owner="teammate") == ["shared"]
    assert titles(owner="outsider") == []


def _fleet(cast: Cast, n: int) -> None:
    Session.objects.bulk_create(
        Session(tenant=cast.acme, owner=cast.owner, title=f"s{i}", provider_instance="alpha", runtime_id=f"${uuid4()}")
        for i in range(n)
    )


def _queries_for_page(cast: Cast, number: int) -> int:
    scope = scope_of(cast.owner, cast.acme)
    with CaptureQueriesContext(connection) as queries:
        page = board_page(scope=scope, filters=BoardFilters(ended=False), number=number)
        rows = [session.owner.username for session in page.object_list]
    assert rows
    return len(queries)


def test_a_page_costs_the_same_queries_at_10_and_at_1000_sessions(cast: Cast) -> None:
    _fleet(cast, 10)
    session = Session.objects.filter(owner=cast.owner).first()
    assert session is not None
    _pending_for(session, cast.owner)
    small = _queries_for_page(cast, 1)
    _fleet(cast, 990)
    assert _queries_for_page(cast, 1) == small
    assert _queries_for_page(cast, 7) == small
    assert small <= 2  # the count and the rows (with owners and the three counts)


def test_the_page_shows_the_board_and_the_socket_url(cast: Cast, browser_as: Any) -> None:
    SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="mine", agent_state="waiting_for_input")
    SessionFactory.create(owner=cast.teammate, tenant=cast.acme, title="theirs")
    client = browser_as(cast.owner)
    body = client.get("/board/").content.decode()
    assert "mine" in body and "theirs" not in body and "waiting" in body
    assert "tess/board.js" in body
    index = client.get("/admin/").content.decode()
    assert 'href="/board/"' in index and 'href="/inbox/"' in index


def test_the_page_query_count_does_not_grow_with_the_fleet(cast: Cast, browser_as: Any) -> None:
    client = browser_as(cast.owner)
    _fleet(cast, 10)
    client.get("/board/")  # warm the session and content-type caches
    with CaptureQueriesContext(connection) as small:
        assert client.get("/board/").status_code == 200
    _fleet(cast, 990)
    with CaptureQueriesContext(connection) as large:
        assert client.get("/board/?page=3").status_code == 200
    assert len(large) == len(small)


def test_someone_in_no_tenant_is_refused(cast: Cast, browser_as: Any, django_user_model: Any) -> None:
    loner = django_user_model.objects.create_user("loner", password="x", is_staff=True)
    assert browser_as(loner).get("/board/").status_code == 403


def test_each_row_says_what_its_agent_has_cost_and_unknown_where_the_runtime_reports_nothing(
    cast: Cast, settings: Any, tmp_path: Any
) -> None:
    from providers_app.registry import reset_instances
    from sessions_app.usage import usage_record

    settings.TESS_RUNTIME_PROVIDERS = {"pi1": {"kind": "pi", "sessions_dir": str(tmp_path)}}
    settings.TESS_MODEL_PRICES = {}
    reset_instances()
    paid = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="paid", provider_instance="pi1")
    fresh = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="fresh", provider_instance="pi1")
    mixed = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="mixed", provider_instance="pi1")
    SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="tmux", provider_instance="tmux1")
    step = {"model": "m", "input": 10, "currency": "USD"}
    usage_record(session=paid, steps=[{**step, "ref": "a", "cost": "0.125"}, {**step, "ref": "b", "cost": "1.2"}])
    usage_record(session=paid, steps=[{**step, "ref": "c", "model": "no-price"}])
    usage_record(
        session=mixed, steps=[{**step, "ref": "a", "cost": "1"}, {**step, "ref": "b", "cost": "1", "currency": "EUR"}]
    )

    scope = scope_of(cast.owner, cast.acme)
    with CaptureQueriesContext(connection) as queries:
        rows = {
            row["title"]: row["usage"]
            for row in (board_row_of(scope=scope, session_id=s.pk) for s in (paid, fresh, mixed))
            if row
        }
    assert len(queries) == 3  # one per row, the sums inside it
    assert rows == {"paid": "1.33 USD + 1 unpriced step", "fresh": "—", "mixed": "several currencies"}
    tmux = Session.objects.get(title="tmux")
    assert (board_row_of(scope=scope, session_id=tmux.pk) or {})["usage"] == "unknown"
    assert fresh.pk and board_row_of(scope=scope_of(cast.teammate, cast.acme), session_id=paid.pk) is None
    reset_instances()
