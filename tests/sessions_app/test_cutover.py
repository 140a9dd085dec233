"""Migration between runtimes: cutover moves a session's ingress bindings to a session on another provider
instance, rollback moves exactly those back; both are recorded, audited, announced in both streams and counted."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from django.db import connection
from prometheus_client import REGISTRY

from providers_app.registry import reset_instances
from sessions_app import cutover, services
from sessions_app.discord.models import DiscordRelayCursor
from sessions_app.models import IngressBinding, MigrationStatus, Session, SessionEvent, SessionMigration
from tess_site.audit.models import AuditEvent
from tess_site.errors import Forbidden, NotFound
from tests.conftest import scope_of
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def instances(settings: Any, tmp_path: Any) -> Any:
    """Three configured instances; ``gamma`` is not available to acme. Cutover never calls a runtime."""
    settings.TESS_RUNTIME_PROVIDERS = {
        "alpha": {"kind": "tmux", "socket": str(tmp_path / "a.sock")},
        "beta": {"kind": "tmux", "socket": str(tmp_path / "b.sock")},
        "gamma": {"kind": "tmux", "socket": str(tmp_path / "g.sock"), "tenants": ["globex"]},
    }
    reset_instances()
    yield
    reset_instances()


def bind_all(session: Session) -> list[IngressBinding]:
    scope = scope_of(session.owner, session.tenant)
    return [
        services.ingress_bind(scope=scope, session_id=session.pk, channel=channel, external_ref=ref)
        for channel, ref in (("web", f"tab-{session.pk}"), ("cli", f"cli-{session.pk}"), ("discord", "9001"))
    ]


def bindings_of(session: Session) -> set[tuple[int, str, str]]:
    return set(IngressBinding.objects.filter(session=session, active=True).values_list("pk", "channel", "external_ref"))


def cutovers_counted(direction: str) -> float:
    return REGISTRY.get_sample_value("tess_session_cutovers_total", {"direction": direction}) or 0.0


def post(client: Any, url: str, data: dict[str, Any] | None = None, key: str | None = None) -> Any:
    return client.post(url, data or {}, format="json", HTTP_IDEMPOTENCY_KEY=key or uuid.uuid4().hex)


def test_cutover_moves_every_active_binding_records_audits_announces_and_counts(
    cast, api_as, django_capture_on_commit_callbacks
):
    source, target = (
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha"),
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="beta"),
    )
    moved = bind_all(source)
    before = cutovers_counted("cutover")
    with django_capture_on_commit_callbacks(execute=True):
        response = post(api_as(cast.owner), f"/api/v1/sessions/{source.pk}/cutover/", {"target": str(target.pk)})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["source"], body["target"], body["status"]) == (str(source.pk), str(target.pk), "cutover")
    assert sorted(body["binding_ids"]) == sorted(b.pk for b in moved)
    assert bindings_of(source) == set()
    assert {pk for pk, _, _ in bindings_of(target)} == {b.pk for b in moved}
    migration = SessionMigration.objects.get()
    assert (migration.created_by, migration.tenant) == (cast.owner, cast.acme)
    for session in (source, target):
        last = SessionEvent.objects.filter(session=session).order_by("-seq").first()
        assert last is not None and (last.kind, last.body["code"]) == ("system", "session.cutover")
    audit = AuditEvent.objects.get(action="session.cutover")
    assert (audit.target_type, audit.target_id, audit.actor_id) == (
        "session_migration",
        str(migration.pk),
        cast.owner.pk,
    )
    assert audit.metadata["target_session"] == str(target.pk)
    assert cutovers_counted("cutover") == before + 1


def test_rollback_restores_exactly_the_moved_bindings(cast, api_as, django_capture_on_commit_callbacks):
    source, target = (
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha"),
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="beta"),
    )
    bind_all(source)
    own = services.ingress_bind(
        scope=scope_of(cast.owner, cast.acme), session_id=target.pk, channel="cli", external_ref="already-on-target"
    )
    original = bindings_of(source)
    client = api_as(cast.owner)
    assert post(client, f"/api/v1/sessions/{source.pk}/cutover/", {"target": str(target.pk)}).status_code == 201
    added_later = services.ingress_bind(
        scope=scope_of(cast.owner, cast.acme), session_id=target.pk, channel="cli", external_ref="bound-after"
    )
    before = cutovers_counted("rollback")
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, f"/api/v1/sessions/{source.pk}/rollback/")
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "rolled_back" and response.json()["rolled_back_by"] == "owner"
    assert bindings_of(source) == original
    assert {pk for pk, _, _ in bindings_of(target)} == {own.pk, added_later.pk}
    assert AuditEvent.objects.filter(action="session.rollback").count() == 1
    for session in (source, target):
        assert SessionEvent.objects.filter(session=session, kind="system", body__code="session.rollback").count() == 1
    assert cutovers_counted("rollback") == before + 1
    again = post(client, f"/api/v1/sessions/{source.pk}/rollback/")
    assert (again.status_code, again.json()["error"]["code"]) == (409, "rollback_nothing_to_roll_back")


def test_a_binding_ended_after_the_cutover_stays_ended_on_rollback(cast):
    scope = scope_of(cast.owner, cast.acme)
    source, target = (
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha"),
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="beta"),
    )
    web, cli, discord = bind_all(source)
    cutover.session_cutover(scope=scope, session_id=source.pk, target_id=target.pk)
    elsewhere = SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="beta")
    services.ingress_bind(scope=scope, session_id=elsewhere.pk, channel="discord", external_ref="9001")  # rebinds it
    migration = cutover.session_rollback(scope=scope, session_id=source.pk)
    assert {pk for pk, _, _ in bindings_of(source)} == {web.pk, cli.pk}
    assert IngressBinding.objects.get(pk=discord.pk).active is False
    assert AuditEvent.objects.get(action="session.rollback").metadata["ended_binding_ids"] == [discord.pk]
    assert migration.status == MigrationStatus.ROLLED_BACK


def test_rollback_refuses_when_the_bindings_were_cut_over_again(cast):
    scope = scope_of(cast.owner, cast.acme)
    a, b = (
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha"),
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="beta"),
    )
    c = SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha")
    bind_all(a)
    cutover.session_cutover(scope=scope, session_id=a.pk, target_id=b.pk)
    cutover.session_cutover(scope=scope, session_id=b.pk, target_id=c.pk)
    with pytest.raises(cutover.BindingsMovedOn):
        cutover.session_rollback(scope=scope, session_id=a.pk)
    assert bindings_of(a) == set() and len(bindings_of(c)) == 3
    cutover.session_rollback(scope=scope, session_id=b.pk)
    cutover.session_rollback(scope=scope, session_id=a.pk)
    assert len(bindings_of(a)) == 3


def test_the_discord_relay_starts_the_moved_channel_at_the_targets_newest_event(cast):
    from sessions_app.discord.services import channel_bind
    from sessions_app.stream import EventKind, system_body

    scope = scope_of(cast.owner, cast.acme)
    source, target = (
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha"),
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="beta"),
    )
    binding = channel_bind(scope=scope, channel_id="777", session_id=str(source.pk))
    for i in range(5):
        services.event_append(session_id=target.pk, kind=EventKind.SYSTEM, body=system_body(text=f"old {i}"))
    cutover.session_cutover(scope=scope, session_id=source.pk, target_id=target.pk)
    cursor = DiscordRelayCursor.objects.get(binding=binding)
    assert cursor.last_seq == 5  # the target's history before the move is not replayed into the channel


def test_a_tenant_admin_may_cut_over_an_operators_sessions(cast):
    source, target = (
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha"),
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="beta"),
    )
    bind_all(source)
    migration = cutover.session_cutover(
        scope=scope_of(cast.admin_user, cast.acme), session_id=source.pk, target_id=target.pk
    )
    assert migration.created_by == cast.admin_user and len(bindings_of(target)) == 3


def test_teammates_are_refused_and_outsiders_see_nothing(cast, api_as):
    source, target = (
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha"),
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="beta"),
    )
    bind_all(source)
    services.session_grant(scope=scope_of(cast.owner, cast.acme), session_id=source.pk, grantee=cast.teammate)
    services.session_grant(scope=scope_of(cast.owner, cast.acme), session_id=target.pk, grantee=cast.teammate)
    url = f"/api/v1/sessions/{source.pk}/cutover/"
    granted = post(api_as(cast.teammate), url, {"target": str(target.pk)})
    assert (granted.status_code, granted.json()["error"]["code"]) == (403, "permission_denied")
    outsider = post(api_as(cast.outsider, cast.globex), url, {"target": str(target.pk)})
    assert (outsider.status_code, outsider.json()["error"]["code"]) == (404, "not_found")
    for tail in ("rollback/", "migrations/"):
        client = api_as(cast.outsider, cast.globex)
        answer = (
            client.get(f"/api/v1/sessions/{source.pk}/{tail}")
            if tail == "migrations/"
            else post(client, f"/api/v1/sessions/{source.pk}/{tail}")
        )
        assert answer.status_code == 404
    assert not SessionMigration.objects.exists() and len(bindings_of(source)) == 3


def test_a_target_in_another_tenant_or_of_another_owner_is_not_found_or_refused(cast):
    scope = scope_of(cast.owner, cast.acme)
    source = SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha")
    bind_all(source)
    foreign = SessionFactory.create(owner=cast.outsider, tenant=cast.globex, provider_instance="gamma")
    with pytest.raises(NotFound):
        cutover.session_cutover(scope=scope, session_id=source.pk, target_id=foreign.pk)
    theirs = SessionFactory.create(owner=cast.teammate, tenant=cast.acme, provider_instance="beta")
    with pytest.raises(NotFound):
        cutover.session_cutover(scope=scope, session_id=source.pk, target_id=theirs.pk)
    services.session_grant(scope=scope_of(cast.teammate, cast.acme), session_id=theirs.pk, grantee=cast.owner)
    with pytest.raises(Forbidden):
        cutover.session_cutover(scope=scope, session_id=source.pk, target_id=theirs.pk)
    assert len(bindings_of(source)) == 3


@pytest.mark.parametrize(
    "case,status,code",
    [
        ("same_instance", 400, "cutover_same_provider_instance"),
        ("same_session", 400, "cutover_same_provider_instance"),
        ("target_exited", 409, "cutover_target_unavailable"),
        ("target_instance_gone", 409, "cutover_target_unavailable"),
        ("nothing_bound", 409, "cutover_nothing_to_move"),
        ("not_a_uuid", 400, "validation_error"),
    ],
)
def test_impossible_cutovers_get_typed_errors_and_change_nothing(cast, api_as, settings, case, status, code):
    source = SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha")
    target = {
        "same_instance": lambda: SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha"),
        "same_session": lambda: source,
        "target_exited": lambda: SessionFactory.create(
            owner=cast.owner, tenant=cast.acme, provider_instance="beta", status="exited"
        ),
        "target_instance_gone": lambda: SessionFactory.create(
            owner=cast.owner, tenant=cast.acme, provider_instance="retired"
        ),
        "nothing_bound": lambda: SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="beta"),
        "not_a_uuid": lambda: None,
    }[case]()
    if case != "nothing_bound":
        bind_all(source)
    before = bindings_of(source)
    events = SessionEvent.objects.count()
    answer = post(
        api_as(cast.owner),
        f"/api/v1/sessions/{source.pk}/cutover/",
        {"target": str(target.pk) if target else "nope"},
    )
    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)
    assert bindings_of(source) == before
    assert not SessionMigration.objects.exists() and SessionEvent.objects.count() == events
    assert not AuditEvent.objects.filter(action="session.cutover").exists()


def test_a_retried_cutover_is_replayed_not_repeated(cast, api_as):
    source, target = (
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha"),
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="beta"),
    )
    bind_all(source)
    client = api_as(cast.owner)
    first = post(client, f"/api/v1/sessions/{source.pk}/cutover/", {"target": str(target.pk)}, key="cut-1")
    again = post(client, f"/api/v1/sessions/{source.pk}/cutover/", {"target": str(target.pk)}, key="cut-1")
    assert again.status_code == 201 and again.headers["Idempotency-Replayed"] == "true"
    assert again.json() == first.json()
    assert SessionMigration.objects.count() == 1
    missing = client.post(f"/api/v1/sessions/{source.pk}/rollback/", {}, format="json")
    assert missing.json()["error"]["code"] == "idempotency_key_required"


def test_the_migrations_of_a_session_are_listed_for_both_ends(cast, api_as, django_assert_max_num_queries):
    scope = scope_of(cast.owner, cast.acme)
    source, target = (
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha"),
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="beta"),
    )
    bind_all(source)
    first = cutover.session_cutover(scope=scope, session_id=source.pk, target_id=target.pk)
    cutover.session_rollback(scope=scope, session_id=source.pk)
    second = cutover.session_cutover(scope=scope, session_id=source.pk, target_id=target.pk)
    client = api_as(cast.owner)
    with django_assert_max_num_queries(6):
        listed = client.get(f"/api/v1/sessions/{target.pk}/migrations/").json()["results"]
    assert [(m["id"], m["status"]) for m in listed] == [(second.pk, "cutover"), (first.pk, "rolled_back")]
    assert client.get(f"/api/v1/sessions/{source.pk}/migrations/").json()["results"] == listed


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_cutovers_at_once_never_split_the_bindings(cast):
    scope = scope_of(cast.owner, cast.acme)
    source = SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha")
    targets = [SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="beta") for _ in range(4)]
    for i in range(6):
        services.ingress_bind(scope=scope, session_id=source.pk, channel="cli", external_ref=f"cli-{i}")
    barrier = threading.Barrier(len(targets))
    outcomes: list[str] = []

    def cut(target: Session) -> None:
        try:
            barrier.wait()
            cutover.session_cutover(scope=scope, session_id=source.pk, target_id=target.pk)
            outcomes.append("moved")
        except cutover.NothingToMove:
            outcomes.append("nothing")
        finally:
            connection.close()

    threads = [threading.Thread(target=cut, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["moved", "nothing", "nothing", "nothing"]
    holders = set(IngressBinding.objects.filter(active=True).values_list("session_id", flat=True))
    assert len(holders) == 1 and holders != {source.pk}
    assert IngressBinding.objects.filter(active=True).count() == 6
    assert SessionMigration.objects.get().binding_ids == sorted(
        IngressBinding.objects.filter(active=True).values_list("pk", flat=True)
    )
