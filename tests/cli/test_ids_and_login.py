"""Ids by unique prefix (within what the caller may see), ``--version``, and a failed login that says what
failed."""

from __future__ import annotations

import socket
import threading
import uuid

import pytest

from sessions_app.models import SessionEvent
from tests.factories import SessionFactory
from tests.tess_site.children import free_port

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def sid(text: str) -> uuid.UUID:
    return uuid.UUID(text)


def test_a_unique_prefix_stands_for_the_whole_id(cast, tess):
    mine = SessionFactory.create(
        id=sid("e1f00000-0000-4000-8000-000000000001"), owner=cast.owner, tenant=cast.acme, title="mine"
    )
    SessionFactory.create(id=sid("e1f00000-0000-4000-8000-000000000002"), owner=cast.teammate, tenant=cast.acme)
    tess.login("owner")
    shown = tess("sessions", "show", "e1f")
    assert shown.returncode == 0, shown.stderr
    assert str(mine.pk) in shown.stdout  # the teammate's session shares the prefix but is not visible
    asked = tess("ask", "E1F0", "status")
    assert asked.returncode == 0, asked.stderr
    assert SessionEvent.objects.filter(session=mine, kind="turn.in").exists()


def test_an_ambiguous_prefix_lists_the_candidates_and_does_nothing(cast, tess):
    a = SessionFactory.create(id=sid("abc00000-0000-4000-8000-000000000001"), owner=cast.owner, tenant=cast.acme)
    b = SessionFactory.create(
        id=sid("abc00000-0000-4000-8000-000000000002"), owner=cast.owner, tenant=cast.acme, title="second"
    )
    tess.login("owner")
    done = tess("ask", "abc", "status")
    assert done.returncode == 2
    assert "'abc' is the start of 2 session ids" in done.stderr
    assert str(a.pk) in done.stderr and f"{b.pk}  second" in done.stderr
    assert not SessionEvent.objects.filter(session__in=[a, b]).exists()
    assert tess("ask", "abc00000-0000-4000-8000-000000000002", "status").returncode == 0


def test_a_prefix_of_someone_elses_session_is_not_found(cast, tess):
    theirs = SessionFactory.create(owner=cast.teammate, tenant=cast.acme)
    tess.login("owner")
    for command in (["sessions", "show"], ["stream"], ["terminate"], ["attach"]):
        done = tess(*command, str(theirs.pk)[:8])
        assert done.returncode == 4, command
        assert "No session you can see" in done.stderr
    assert not SessionEvent.objects.filter(session=theirs).exists()


def test_version(tess):
    done = tess("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == "tess 0.1.0"


def test_a_wrong_password_says_so_and_saves_nothing(cast, tess):
    done = tess("login", "--username", "owner", "--password-stdin", stdin="wrong\n")
    assert done.returncode == 3
    assert "Login failed: the username or password is wrong" in done.stderr
    assert "Run `tess login`" not in done.stderr
    assert not (tess.home / "tess" / "config.json").exists()


def test_a_refused_pasted_token_says_so(cast, tess):
    done = tess("login", "--token-stdin", stdin="tess_not_a_real_token\n")
    assert done.returncode == 3
    assert "does not accept this token" in done.stderr


def test_an_unreachable_server_says_connection_refused(cast, tess):
    url = f"http://127.0.0.1:{free_port()}"
    done = tess("login", "--url", url, "--username", "owner", "--password-stdin", stdin="owner-pass-1234\n")
    assert done.returncode == 6
    assert f"nothing answers at {url} (connection refused)" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def plain_http_port():
    """A server that answers anything, a TLS hello included, with plain HTTP, as a non-TLS port does."""
    server = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=answer, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def test_https_to_a_plain_http_server_says_tls_failed(cast, tess, plain_http_port):
    url = f"https://127.0.0.1:{plain_http_port}"
    done = tess("login", "--url", url, "--username", "owner", "--password-stdin", stdin="owner-pass-1234\n")
    assert done.returncode == 6
    assert f"the TLS handshake with {url} failed" in done.stderr


def test_the_login_limit_is_named_as_such(cast, tess):
    for _ in range(30):
        done = tess("login", "--username", "owner", "--password-stdin", stdin="wrong\n")
        if done.returncode != 3:
            break
    assert done.returncode == 5
    assert "Login refused: too many attempts" in done.stderr
