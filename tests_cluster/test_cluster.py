"""Two ASGI nodes, two Celery workers and beat on one PostgreSQL and one Redis: scale-out.

Each test states one property of the deployment under a fault or across nodes; the helpers below talk to
the nodes as real clients do (personal tokens over HTTP, websockets with a cursor).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from django.db import connection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection

from approvals_app.models import Approval, ApprovalExecution
from sessions_app.models import InboxItem, Session, SessionEvent
from tess_site.audit.models import AuditEvent
from tess_site.leases import LeaseState
from tests.waiting import wait_for

from .cluster import Cluster, Node, api, bearer_socket, idem, json_of

pytestmark = [pytest.mark.django_db(transaction=True)]

EXECUTE = "approvals_app.tasks.execute_approval"


# --- clients -----------------------------------------------------------------------------------------


def _start_session(node: Node, token: str, title: str = "work") -> str:
    with api(node, token) as client:
        response = client.post("/api/v1/sessions/", json={"provider": "alpha", "title": title}, headers=idem())
    assert response.status_code == 201, json_of(response)
    return str(response.json()["id"])


def _turn(node: Node, token: str, session_id: str, text: str) -> dict[str, Any]:
    with api(node, token) as client:
        response = client.post(f"/api/v1/sessions/{session_id}/turns/", json={"text": text}, headers=idem())
    assert response.status_code == 200, json_of(response)
    return dict(response.json())


def _open(node: Node, path: str, token: str) -> ClientConnection:
    return bearer_socket(f"{node.ws}{path}", token)


def _frames(ws: ClientConnection, n: int, timeout: float = 30) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    while len(frames) < n:
        frame = json.loads(ws.recv(timeout=timeout))
        if frame["kind"] != "heartbeat":
            frames.append(frame)
    return frames


class Subscriber(threading.Thread):
    """A stream client that reconnects from its last seq whenever its socket drops, as the CLI does."""

    def __init__(self, node: Node, token: str, session_id: str) -> None:
        super().__init__(daemon=True)
        self.node, self.token, self.session_id = node, token, session_id
        self.seqs: list[int] = []
        self.connects = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            cursor = self.seqs[-1] if self.seqs else 0
            try:
                with _open(self.node, f"/ws/sessions/{self.session_id}/stream/?cursor={cursor}", self.token) as ws:
                    self.connects += 1
                    while not self.done.is_set():
                        try:
                            frame = json.loads(ws.recv(timeout=0.5))
                        except TimeoutError:
                            continue
                        if frame["seq"] is not None:
                            self.seqs.append(frame["seq"])
            except (ConnectionClosed, InvalidHandshake, InvalidStatus, OSError, TimeoutError):
                time.sleep(0.2)

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=10)


def _last_seq(session_id: str) -> int:
    return int(Session.objects.values_list("last_seq", flat=True).get(pk=session_id))


def _kinds(session_id: str, kind: str) -> list[dict[str, Any]]:
    return [e.body for e in SessionEvent.objects.filter(session_id=session_id, kind=kind).order_by("seq")]


def _lifecycle(session_id: str) -> list[str]:
    """The session's statuses in order, each once: agent-state changes are status events too, with the same
    status repeated beside the new agent state."""
    statuses = [body["status"] for body in _kinds(session_id, "status")]
    return [status for i, status in enumerate(statuses) if i == 0 or status != statuses[i - 1]]


def _output(session_id: str) -> str:
    return "".join(body["data"] for body in _kinds(session_id, "output"))


def _attach_interactive(node: Node, token: str, session_id: str) -> None:
    with api(node, token) as client:
        response = client.post(f"/api/v1/sessions/{session_id}/attach/", json={"mode": "interactive"}, headers=idem())
    assert response.status_code == 200, json_of(response)


def _message(node: Node, token: str, session_id: str, text: str) -> int:
    with api(node, token) as client:
        response = client.post(f"/api/v1/sessions/{session_id}/messages/", json={"text": text}, headers=idem())
    assert response.status_code == 202, json_of(response)
    return int(response.json()["inbox_id"])


# --- a. one stream, two nodes ----------------------------------------------------------------------------


def test_a_websocket_on_one_node_receives_the_turns_posted_to_the_other(cluster: Cluster, cast, token_for):
    a, b = cluster.nodes["a"], cluster.nodes["b"]
    token = token_for(cast.owner)
    session_id = _start_session(a, token)
    start = _last_seq(session_id)
    with _open(a, f"/ws/sessions/{session_id}/stream/?cursor={start}", token) as ws:
        replies = [_turn(b, token, session_id, f"hello from node b, number {i}") for i in range(3)]
        frames = _frames(ws, sum(len(r["events"]) for r in replies))
    expected = [event for reply in replies for event in reply["events"]]
    assert [f["seq"] for f in frames] == [e["seq"] for e in expected]
    assert [(f["kind"], f["body"]) for f in frames] == [(e["kind"], e["body"]) for e in expected]
    assert [f["body"]["turn_id"] for f in frames if f["kind"] == "turn.out"] == [r["turn_id"] for r in replies]


def test_a_stream_on_either_node_refuses_another_tenant(cluster: Cluster, cast, token_for):
    session_id = _start_session(cluster.nodes["a"], token_for(cast.owner))
    outsider = token_for(cast.outsider, cast.globex)
    for node in cluster.nodes.values():
        with (
            _open(node, f"/ws/sessions/{session_id}/stream/?cursor=0", outsider) as ws,
            pytest.raises(ConnectionClosed) as closed,
        ):
            ws.recv(timeout=20)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4404
        with api(node, outsider) as client:
            assert client.get(f"/api/v1/sessions/{session_id}/events/").status_code == 404


# --- b. one approval, two nodes, two workers: executed once ----------------------------------------------


def _tmux_sessions(cluster: Cluster) -> list[str]:
    return cluster.tmux.tmux("list-sessions", "-F", "#{session_id}").split()


def _browser_cookie(user: Any) -> str:
    """A signed-in browser session of ``user`` (stored in the shared database, so valid on every node)."""
    from django.conf import settings
    from django.test import Client

    browser = Client()
    browser.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"


def _link_token(ws: ClientConnection) -> str:
    """The one-time link pushed privately to the approver's ``/ws/me/`` socket."""
    while True:
        frame = json.loads(ws.recv(timeout=30))
        if frame["kind"] == "approval.link":
            return urlparse(frame["body"]["url"]).path.rstrip("/").rsplit("/", 1)[-1]


def _ask_to_terminate(cluster: Cluster, owner: str, approver: str, session_id: str) -> tuple[str, str]:
    """The owner asks on node a; the approver's ``/ws/me/`` on node b gets the link. (approval id, link token)"""
    with _open(cluster.nodes["b"], "/ws/me/", approver) as me:
        with api(cluster.nodes["a"], owner) as client:
            asked = client.post(f"/api/v1/sessions/{session_id}/terminate/", json={}, headers=idem())
        assert asked.status_code == 202, json_of(asked)
        return str(asked.json()["id"]), _link_token(me)


class ApprovalPage:
    """The approver's browser on the one-time page: loaded once on one node, then able to post to any."""

    def __init__(self, node: Node, user: Any, token: str) -> None:
        self.token = token
        self.cookie = _browser_cookie(user)
        with httpx.Client(base_url=node.url, headers={"Cookie": self.cookie}, trust_env=False, timeout=30) as page:
            shown = page.get(f"/approvals/{token}/")
            assert shown.status_code == 200, shown.text[:500]
            self.csrf = page.cookies["csrftoken"]

    def approve(self, node: Node, gate: threading.Barrier | None = None) -> int:
        headers = {"Cookie": f"{self.cookie}; csrftoken={self.csrf}"}
        with httpx.Client(base_url=node.url, headers=headers, trust_env=False, timeout=30) as browser:
            if gate is not None:
                gate.wait()
            form = {"decision": "approve", "csrfmiddlewaretoken": self.csrf}
            return browser.post(f"/approvals/{self.token}/", data=form).status_code


def _execution(approval_id: str) -> str:
    return str(Approval.objects.values_list("execution", flat=True).get(pk=approval_id))


def test_an_approval_decided_on_two_nodes_at_once_terminates_the_session_exactly_once(
    cluster: Cluster, cast, token_for
):
    a, b = cluster.nodes["a"], cluster.nodes["b"]
    owner = token_for(cast.owner)
    session_id = _start_session(a, owner)
    runtime_id = Session.objects.get(pk=session_id).runtime_id
    assert runtime_id in _tmux_sessions(cluster)

    approval_id, token = _ask_to_terminate(cluster, owner, token_for(cast.approver), session_id)

    # The approver's browser loads the page on node b, then "clicks" on both nodes at the same moment.
    page = ApprovalPage(b, cast.approver, token)
    statuses: dict[str, int] = {}
    gate = threading.Barrier(2)
    clicks = [
        threading.Thread(target=lambda n=node: statuses.__setitem__(n.name, page.approve(n, gate))) for node in (a, b)
    ]
    for thread in clicks:
        thread.start()
    for thread in clicks:
        thread.join()
    assert sorted(statuses.values())[0] == 200 and sorted(statuses.values())[1] >= 400, statuses

    item = ApprovalExecution.objects.get(approval_id=approval_id)
    # Extra wake-ups for the same item on the shared broker: both workers race to claim it.
    for _ in range(6):
        cluster.control().send_task(EXECUTE, args=[item.pk])

    assert wait_for(lambda: _execution(approval_id) == "executed", timeout=60), cluster.logs()
    assert wait_for(lambda: sum(cluster.processed(EXECUTE).values()) >= 7, timeout=30), cluster.processed(EXECUTE)
    item.refresh_from_db()
    assert (item.state, item.attempts) == (LeaseState.DONE, 1)
    assert ApprovalExecution.objects.filter(approval_id=approval_id).count() == 1
    executions = AuditEvent.objects.filter(action="session.terminate", target_id=session_id, outcome="executed")
    assert executions.count() == 1
    assert _lifecycle(session_id) == ["running", "terminated"]
    assert [body["status"] for body in _kinds(session_id, "approval")].count("executed") == 1
    assert Session.objects.get(pk=session_id).status == "terminated"
    assert runtime_id not in _tmux_sessions(cluster)


def test_an_outsider_cannot_decide_an_approval_on_any_node(cluster: Cluster, cast, token_for):
    session_id = _start_session(cluster.nodes["a"], token_for(cast.owner))
    _, token = _ask_to_terminate(cluster, token_for(cast.owner), token_for(cast.approver), session_id)
    cookie = _browser_cookie(cast.outsider)
    for node in cluster.nodes.values():
        with httpx.Client(base_url=node.url, headers={"Cookie": cookie}, trust_env=False, timeout=30) as page:
            assert page.get(f"/approvals/{token}/").status_code in (403, 404)
    assert Approval.objects.get(target_id=session_id).status == "pending"


# --- c. a worker killed mid-task ---------------------------------------------------------------------------


def _pane(cluster: Cluster, session_id: str) -> str:
    runtime_id = Session.objects.get(pk=session_id).runtime_id
    return cluster.tmux.tmux("capture-pane", "-p", "-t", runtime_id)


def test_a_worker_killed_mid_send_leaves_the_message_delivered_exactly_once_by_the_other(
    cluster: Cluster, cast, token_for
):
    a, b = cluster.nodes["a"], cluster.nodes["b"]
    token = token_for(cast.owner)
    session_id = _start_session(a, token)
    _attach_interactive(b, token, session_id)
    entered = Path(f"{cluster.hold}.entered")
    entered.unlink(missing_ok=True)
    cluster.hold.touch()

    inbox_id = _message(a, token, session_id, "survives-sigkill")
    assert wait_for(lambda: entered.exists() and entered.read_text().strip() != "", timeout=30), cluster.logs()
    holder_pid = int(entered.read_text())
    (holder,) = [w for w in cluster.workers.values() if w.pid == holder_pid]
    (other,) = [w for w in cluster.workers.values() if w.pid != holder_pid]
    assert InboxItem.objects.get(pk=inbox_id).state == LeaseState.LEASED

    os.kill(holder_pid, signal.SIGKILL)
    holder.child.process.wait(timeout=10)
    cluster.hold.unlink()
    # Nobody touches the item: its lease runs out, beat's sweeper re-queues it, the other worker sends it.
    assert wait_for(lambda: InboxItem.objects.get(pk=inbox_id).state == LeaseState.DONE, timeout=60), cluster.logs()
    item = InboxItem.objects.get(pk=inbox_id)
    assert item.attempts == 2 and other.child.alive()
    assert wait_for(lambda: "got:survives-sigkill" in _output(session_id), timeout=30), cluster.logs()
    assert _output(session_id).count("got:survives-sigkill") == 1
    assert _pane(cluster, session_id).count("got:survives-sigkill") == 1
    assert [body["inbox_id"] for body in _kinds(session_id, "message.in")] == [inbox_id]


# --- d. Redis restarts ----------------------------------------------------------------------------------


def test_a_redis_restart_loses_no_event_and_no_durable_work(cluster: Cluster, cast, token_for):
    a, b = cluster.nodes["a"], cluster.nodes["b"]
    token = token_for(cast.owner)
    session_id = _start_session(a, token)
    _attach_interactive(a, token, session_id)
    subscribers = [Subscriber(a, token, session_id), Subscriber(b, token, session_id)]
    for subscriber in subscribers:
        subscriber.start()
    assert wait_for(lambda: all(s.connects for s in subscribers), timeout=30)

    doomed = _start_session(b, token, title="to terminate")
    approval_id, link = _ask_to_terminate(cluster, token, token_for(cast.approver), doomed)
    page = ApprovalPage(b, cast.approver, link)

    turns = [_turn(b, token, session_id, f"before the restart, number {i}") for i in range(3)]
    cluster.redis.kill()
    turns += [_turn((a, b)[i % 2], token, session_id, f"while redis is down, number {i}") for i in range(4)]
    # Durable work made while the broker is down: committed, its wake-up lost with Redis.
    inbox_id = _message(b, token, session_id, "queued-while-redis-down")
    assert page.approve(a) == 200
    cluster.redis.start()
    cluster.forget_control()
    turns += [_turn((a, b)[i % 2], token, session_id, f"after the restart, number {i}") for i in range(3)]

    # The periodic re-queue finds the item in PostgreSQL once the broker is back.
    assert wait_for(lambda: InboxItem.objects.get(pk=inbox_id).state == LeaseState.DONE, timeout=90), cluster.logs()
    assert wait_for(lambda: "got:queued-while-redis-down" in _output(session_id), timeout=30)
    last = _last_seq(session_id)
    try:
        assert wait_for(lambda: all(s.seqs and s.seqs[-1] >= last for s in subscribers), timeout=60), [
            (s.connects, s.seqs[-5:]) for s in subscribers
        ]
    finally:
        for subscriber in subscribers:
            subscriber.stop()
    for subscriber in subscribers:
        assert subscriber.seqs == list(range(1, len(subscriber.seqs) + 1))  # every event once, in order
        assert subscriber.connects >= 2  # the restart did cut them off; they resumed from their cursor
    turn_ids = [t["turn_id"] for t in turns]
    assert [body["turn_id"] for body in _kinds(session_id, "turn.in")] == turn_ids
    assert [body["turn_id"] for body in _kinds(session_id, "turn.out")] == turn_ids
    assert InboxItem.objects.get(pk=inbox_id).attempts == 1
    assert [body["inbox_id"] for body in _kinds(session_id, "message.in")] == [inbox_id]
    assert _output(session_id).count("got:queued-while-redis-down") == 1
    assert wait_for(lambda: _execution(approval_id) == "executed", timeout=60), cluster.logs()
    assert ApprovalExecution.objects.get(approval_id=approval_id).attempts == 1
    assert AuditEvent.objects.filter(action="session.terminate", target_id=doomed, outcome="executed").count() == 1
    assert _lifecycle(doomed) == ["running", "terminated"]


# --- e. the database drops its connections ----------------------------------------------------------------


def _held_session_row(session_id: str) -> Any:
    """A second connection that holds the session row locked, so a turn on it certainly waits mid-request."""
    import psycopg

    db = connection.settings_dict
    locker = psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=int(db["PORT"] or 5432),
        user=db["USER"],
        password=db["PASSWORD"] or None,
        dbname=db["NAME"],
    )
    table = Session._meta.db_table
    locker.execute(f'SELECT 1 FROM "{table}" WHERE id = %s FOR UPDATE', [session_id])  # noqa: S608
    return locker


def _drop_connections(*keep: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND NOT (pid = ANY(%s))",
            [list(keep)],
        )
        return int(cursor.fetchone()[0])


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(cursor.fetchone()[0]) > 0


def _assert_typed_503(response: httpx.Response) -> None:
    assert response.status_code == 503, (response.status_code, json_of(response))
    assert response.json()["error"]["code"] == "database_unavailable"
    assert int(response.headers["Retry-After"]) > 0


def test_a_dropped_database_connection_gives_a_typed_503_and_the_nodes_recover_without_a_restart(
    cluster: Cluster, cast, token_for
):
    a, b = cluster.nodes["a"], cluster.nodes["b"]
    token = token_for(cast.owner)
    session_id = _start_session(a, token)
    pids = {name: node.child.process.pid for name, node in cluster.nodes.items()}

    locker = _held_session_row(session_id)
    answers: list[httpx.Response] = []
    key = idem()
    turn = threading.Thread(
        target=lambda: answers.append(
            api(a, token).post(f"/api/v1/sessions/{session_id}/turns/", json={"text": "hello"}, headers=key)
        )
    )
    try:
        turn.start()
        assert wait_for(_waiting_on_a_lock, timeout=30)
        assert _drop_connections(locker.info.backend_pid) >= 1
        turn.join(timeout=30)
    finally:
        locker.close()
    (answer,) = answers
    _assert_typed_503(answer)
    # The failed request left nothing behind: its idempotency record rolled back with it, so the client's
    # retry with the same key is handled now (not 409 in flight), on the other node too, exactly once.
    with api(b, token) as http:
        retried = http.post(f"/api/v1/sessions/{session_id}/turns/", json={"text": "hello"}, headers=key)
        assert retried.status_code == 200, json_of(retried)
        again = http.post(f"/api/v1/sessions/{session_id}/turns/", json={"text": "hello"}, headers=key)
        assert again.status_code == 200 and again.headers.get("Idempotency-Replayed") == "true"
        assert again.json() == retried.json()

    # Drops while a mixed load runs on both nodes: each answer is a success or a typed 503, never a 500.
    statuses: list[httpx.Response] = []
    stop = threading.Event()

    def client(node: Node) -> None:
        with api(node, token) as http:
            while not stop.is_set():
                statuses.append(http.get("/api/v1/sessions/"))
                statuses.append(http.get(f"/api/v1/sessions/{session_id}/events/"))
                statuses.append(
                    http.post(f"/api/v1/sessions/{session_id}/turns/", json={"text": "hello again"}, headers=idem())
                )

    clients = [threading.Thread(target=client, args=(node,)) for node in (a, b, a, b)]
    for thread in clients:
        thread.start()
    try:
        for _ in range(5):
            time.sleep(0.3)
            _drop_connections()
    finally:
        stop.set()
        for thread in clients:
            thread.join(timeout=60)
    assert statuses
    for response in statuses:
        if response.status_code != 200:
            _assert_typed_503(response)

    # Recovered, by the same processes: every node answers again.
    for node in (a, b):
        with api(node, token) as http:
            assert http.get("/api/v1/sessions/").status_code == 200
            assert http.get(f"/api/v1/sessions/{session_id}/events/").status_code == 200
            reply = http.post(f"/api/v1/sessions/{session_id}/turns/", json={"text": "recovered"}, headers=idem())
            assert reply.status_code == 200, json_of(reply)
    assert {name: node.child.process.pid for name, node in cluster.nodes.items()} == pids
    assert all(node.child.alive() for node in cluster.nodes.values())
    seqs = list(SessionEvent.objects.filter(session_id=session_id).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
