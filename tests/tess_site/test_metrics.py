"""``GET /metrics``: who may scrape it, and that the metrics move when real things happen.

Values are read by scraping the endpoint through the Django test client (the test process keeps its metrics
in-process) and compared before and after an action, since other tests in the process count too.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from approvals_app.consumers import MeConsumer
from approvals_app.decisions import approval_decide
from approvals_app.models import Approval
from providers_app.health import check_provider_heartbeats
from providers_app.registry import reset_instances
from sessions_app import services as sessions
from sessions_app.models import Session
from sessions_app.stream import EventKind, system_body
from tess_site.asgi import application
from tess_site.tasks import sweep_expired_leases
from tests.approvals_app.approval_fixtures import (  # noqa: F401  (fixtures)
    executed,
    mailed,
    request_touch,
    tokens_by_recipient,
)
from tests.conftest import require_or_skip, scope_of

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(remote_addr: str = "127.0.0.1") -> Samples:
    response = Client().get("/metrics", REMOTE_ADDR=remote_addr)
    assert response.status_code == 200, response.status_code
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


# --- who may scrape ----------------------------------------------------------------------------------------------


def test_loopback_may_scrape_in_the_prometheus_text_format():
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert b"# TYPE tess_http_requests_total counter" in response.content


def test_ipv6_loopback_and_ipv4_mapped_loopback_may_scrape():
    assert Client().get("/metrics", REMOTE_ADDR="::1").status_code == 200
    assert Client().get("/metrics", REMOTE_ADDR="::ffff:127.0.0.1").status_code == 200


@pytest.mark.parametrize("remote_addr", ["203.0.113.7", "10.1.2.3", "2001:db8::1", "not-an-address", ""])
def test_it_refuses_addresses_outside_the_allowed_networks_with_a_plain_404(remote_addr):
    response = Client().get("/metrics", REMOTE_ADDR=remote_addr)
    assert response.status_code == 404
    assert b"tess_" not in response.content


def test_a_signed_in_outsider_from_another_address_is_refused_too(cast):
    client = Client()
    client.force_login(cast.outsider)
    assert client.get("/metrics", REMOTE_ADDR="198.51.100.20").status_code == 404


@pytest.mark.parametrize(
    "header",
    ["HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP"],
    ids=["x-forwarded-for", "forwarded", "x-real-ip"],
)
def test_it_refuses_a_request_relayed_by_a_proxy_even_from_loopback(header):
    response = Client().get("/metrics", REMOTE_ADDR="127.0.0.1", **{header: "127.0.0.1"})
    assert response.status_code == 404


def test_configured_networks_decide(settings):
    settings.TESS_METRICS_ALLOWED_IPS = ["10.0.0.0/8"]
    assert Client().get("/metrics", REMOTE_ADDR="10.20.30.40").status_code == 200
    assert Client().get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 404
    assert Client().get("/metrics", REMOTE_ADDR="11.0.0.1").status_code == 404


def test_turned_off_it_answers_nobody(settings):
    settings.TESS_METRICS = False
    assert Client().get("/metrics").status_code == 404


def test_it_only_reads():
    assert Client().post("/metrics").status_code == 405


# --- what moves -----------------------------------------------------------------------------------------------------


def test_a_request_is_counted_by_route_name_and_status_class_and_timed():
    before = scrape()
    assert Client().get("/healthz").status_code == 200
    assert Client().get("/no/such/page/").status_code == 404
    after = scrape()
    ok = {"method": "GET", "route": "healthz", "status": "2xx"}
    assert value(after, "tess_http_requests_total", **ok) == value(before, "tess_http_requests_total", **ok) + 1
    missing = {"method": "GET", "route": "unmatched", "status": "4xx"}
    assert (
        value(after, "tess_http_requests_total", **missing) == value(before, "tess_http_requests_total", **missing) + 1
    )
    timed = {"method": "GET", "route": "healthz"}
    count = "tess_http_request_duration_seconds_count"
    assert value(after, count, **timed) == value(before, count, **timed) + 1


def test_api_routes_are_labelled_by_name_never_by_id(cast, api_as):
    client = api_as(cast.owner)
    client.get("/api/v1/sessions/00000000-0000-0000-0000-000000000001/")
    after = scrape()
    routes = {dict(labels).get("route", "") for (name, labels) in after if name == "tess_http_requests_total"}
    assert not any("00000000" in route for route in routes)


def test_approval_transitions_are_counted_after_commit_and_pending_ones_are_gauged(
    mailed,  # noqa: F811  (the imported fixtures)
    request_touch,  # noqa: F811
    executed,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    before = scrape()
    first = request_touch(target_id="doc-1")
    request_touch(target_id="doc-2")
    middle = scrape()
    assert value(middle, "tess_approval_transitions_total", to="requested") == (
        value(before, "tess_approval_transitions_total", to="requested") + 2
    )
    assert value(middle, "tess_approvals_pending") == 2

    first_token = tokens_by_recipient()[mailed.approver.email][0]  # links go out in the order of the requests
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(scope_of(mailed.approver, mailed.acme), token=first_token, approve=True)
    after = scrape()
    assert Approval.objects.get(pk=first.pk).execution == Approval.Execution.EXECUTED
    for state in ("approved", "executed"):
        assert value(after, "tess_approval_transitions_total", to=state) == (
            value(before, "tess_approval_transitions_total", to=state) + 1
        )
    assert value(after, "tess_approvals_pending") == 1


def test_a_task_run_is_counted_by_name_and_state_and_timed(db):
    task = "tess_site.tasks.sweep_expired_leases"
    before = scrape()
    sweep_expired_leases.delay()  # eager in the test settings: runs here, through Celery's tracer and signals
    after = scrape()
    for state in ("started", "succeeded"):
        assert value(after, "tess_celery_tasks_total", task=task, state=state) == (
            value(before, "tess_celery_tasks_total", task=task, state=state) + 1
        )
    count = "tess_celery_task_duration_seconds_count"
    assert value(after, count, task=task) == value(before, count, task=task) + 1


@pytest.fixture
def providers(settings: Any) -> Iterator[Path]:
    """A tmux instance on a private socket with no server (healthy: no sessions) and one of an unknown kind."""
    if shutil.which("tmux") is None:
        require_or_skip("TMUX IS NOT INSTALLED")
    root = Path(tempfile.mkdtemp(prefix="tess-metrics-", dir="/tmp"))
    settings.TESS_RUNTIME_PROVIDERS = {
        "quiet": {"kind": "tmux", "socket": str(root / "tmux.sock"), "log_dir": str(root / "logs")},
        "broken": {"kind": "no-such-kind"},
    }
    reset_instances()
    try:
        yield root
    finally:
        reset_instances()
        shutil.rmtree(root, ignore_errors=True)


def test_provider_heartbeats_are_gauged_per_instance(db, providers):
    started = time.time()
    assert check_provider_heartbeats.delay().get() == 1
    after = scrape()
    assert value(after, "tess_provider_up", instance="quiet", kind="tmux") == 1
    assert value(after, "tess_provider_heartbeat_timestamp_seconds", instance="quiet", kind="tmux") >= int(started)
    assert value(after, "tess_provider_up", instance="broken", kind="no-such-kind") == 0
    assert (
        "tess_provider_heartbeat_timestamp_seconds",
        (("instance", "broken"), ("kind", "no-such-kind")),
    ) not in after


# --- websockets, through the real ASGI application ------------------------------------------------------------------


# Like sync_to_async, and closes the worker thread's connection after use (with CONN_MAX_AGE 0, below).
in_thread = database_sync_to_async


@pytest.fixture
def connections_closed_after_use() -> Iterator[None]:
    """The consumers query from worker threads this test never joins; with persistent connections those would
    stay open past the test and keep the test database from being dropped."""
    from django.db import connections

    previous = connections.settings["default"].get("CONN_MAX_AGE", 0)
    connections.settings["default"]["CONN_MAX_AGE"] = 0
    try:
        yield
    finally:
        connections.settings["default"]["CONN_MAX_AGE"] = previous


def _bearer(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


async def me_socket_after_hello(user: Any, token_for: Any) -> tuple[WebsocketCommunicator, str]:
    """A ``/ws/me/`` socket of ``user`` through the real ASGI application, past its hello, and the metrics
    scraped just before it opened."""
    token = await in_thread(token_for)(user)
    before = await in_thread(scrape)()
    communicator = WebsocketCommunicator(application, "/ws/me/", headers=_bearer(token))
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    assert (await communicator.receive_json_from(timeout=10))["kind"] == "hello"
    return communicator, before


@pytest.mark.django_db(transaction=True)
async def test_websocket_connects_and_disconnects_move_the_counters_and_the_open_gauge(
    cast, token_for, connections_closed_after_use
):
    communicator, before = await me_socket_after_hello(cast.owner, token_for)
    during = await in_thread(scrape)()
    await communicator.disconnect()
    after = await in_thread(scrape)()

    me = {"consumer": "MeConsumer"}
    assert (
        value(during, "tess_websocket_connects_total", **me) == value(before, "tess_websocket_connects_total", **me) + 1
    )
    assert value(during, "tess_websocket_open", **me) == value(before, "tess_websocket_open", **me) + 1
    assert value(after, "tess_websocket_open", **me) == value(before, "tess_websocket_open", **me)
    assert value(after, "tess_websocket_disconnects_total", **me) == (
        value(before, "tess_websocket_disconnects_total", **me) + 1
    )


@pytest.mark.django_db(transaction=True)
async def test_a_socket_whose_client_left_while_it_was_still_sending_is_not_counted_open(
    cast, token_for, connections_closed_after_use, monkeypatch
):
    """daphne raises on a send to a client that has gone; the consumer ends there, with no disconnect
    message after it, and must not stay in the open gauge."""
    send_event = MeConsumer.send_event

    async def gone_after_hello(self: MeConsumer, kind: str, body: Any) -> None:
        if kind != "hello":
            raise RuntimeError("Attempt to send on a closed protocol")
        await send_event(self, kind, body)

    monkeypatch.setattr(MeConsumer, "send_event", gone_after_hello)
    communicator, before = await me_socket_after_hello(cast.owner, token_for)
    with pytest.raises(RuntimeError, match="closed protocol"):
        await communicator.wait(timeout=10)
    after = await in_thread(scrape)()

    me = {"consumer": "MeConsumer"}
    connects = "tess_websocket_connects_total"
    assert value(after, connects, **me) == value(before, connects, **me) + 1
    assert value(after, "tess_websocket_open", **me) == value(before, "tess_websocket_open", **me)


@pytest.mark.django_db(transaction=True)
async def test_a_refused_websocket_is_not_counted_as_open(cast, connections_closed_after_use):
    before = await in_thread(scrape)()
    communicator = WebsocketCommunicator(application, "/ws/me/", headers=_bearer("tess_abcdefgh_" + "x" * 43))
    connected, _ = await communicator.connect(timeout=10)
    assert not connected
    await communicator.disconnect()
    after = await in_thread(scrape)()
    assert value(after, "tess_websocket_connects_total", consumer="MeConsumer") == value(
        before, "tess_websocket_connects_total", consumer="MeConsumer"
    )


def _append(session_id: Any, text: str) -> None:
    sessions.event_append(session_id=session_id, kind=EventKind.SYSTEM, body=system_body(text=text))


@pytest.mark.django_db(transaction=True)
async def test_stream_lag_is_observed_for_live_events_only(cast, token_for, connections_closed_after_use):
    token = await in_thread(token_for)(cast.owner)
    session = await Session.objects.acreate(
        tenant=cast.acme, owner=cast.owner, title="t", provider_instance="alpha", runtime_id="$1"
    )
    await in_thread(_append)(session.pk, "history")
    before = await in_thread(scrape)()
    communicator = WebsocketCommunicator(
        application, f"/ws/sessions/{session.pk}/stream/?cursor=0", headers=_bearer(token)
    )
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    assert (await communicator.receive_json_from(timeout=10))["body"]["text"] == "history"
    caught_up = await in_thread(scrape)()

    await in_thread(_append)(session.pk, "live")
    frame = await communicator.receive_json_from(timeout=20)
    while frame["kind"] == "heartbeat":
        frame = await communicator.receive_json_from(timeout=20)
    assert frame["body"]["text"] == "live"
    await communicator.disconnect()
    after = await in_thread(scrape)()

    count = "tess_stream_lag_seconds_count"
    assert value(caught_up, count) == value(before, count)  # history is not lag
    assert value(after, count) == value(before, count) + 1
    assert value(after, "tess_websocket_open", consumer="SessionStreamConsumer") == value(
        before, "tess_websocket_open", consumer="SessionStreamConsumer"
    )
