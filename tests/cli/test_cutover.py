"""``tess`` follows a cutover: a CLI profile binds to the session it uses, a cutover moves it, and the CLI says
where it now points, on its next command or at once while it streams."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from providers_app.registry import reset_instances
from sessions_app import cutover, services
from sessions_app.models import IngressBinding, Session
from sessions_app.stream import EventKind, system_body
from tests.conftest import scope_of
from tests.factories import SessionFactory
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def instances(settings: Any, tmp_path: Any) -> Iterator[None]:
    """Two instances acme may use (the cutover runs in this process; it never calls a runtime)."""
    settings.TESS_RUNTIME_PROVIDERS = {
        "alpha": {"kind": "tmux", "socket": str(tmp_path / "a.sock")},
        "beta": {"kind": "tmux", "socket": str(tmp_path / "b.sock")},
    }
    reset_instances()
    yield
    reset_instances()


def two_sessions(cast: Any) -> tuple[Session, Session]:
    source = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="old", provider_instance="alpha")
    target = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="new", provider_instance="beta")
    for session, text in ((source, "on the old runtime"), (target, "on the new runtime")):
        services.event_append(session_id=session.pk, kind=EventKind.SYSTEM, body=system_body(text=text))
    return source, target


def cut_over(cast: Any, source: Session, target: Session) -> int:
    return cutover.session_cutover(scope=scope_of(cast.owner, cast.acme), session_id=source.pk, target_id=target.pk).pk


def read_until(process: subprocess.Popen[str], text: str, *, timeout: float = 60) -> list[str]:
    """The stream's lines up to the one with ``text``; the stream is killed (and the test fails) after
    ``timeout`` seconds without it."""
    assert process.stdout is not None
    lines: list[str] = []
    deadline = threading.Timer(timeout, process.kill)
    deadline.start()
    try:
        while not lines or text not in lines[-1]:
            line = process.stdout.readline()
            assert line, (
                f"the stream ended before {text!r}: {lines}; stderr: {process.stderr.read() if process.stderr else ''}"
            )
            lines.append(line)
    finally:
        deadline.cancel()
    return lines


def test_the_next_command_after_a_cutover_says_where_the_profile_now_points(cast, tess):
    source, target = two_sessions(cast)
    tess.login("owner")
    before = tess("stream", str(source.pk), "--max-events", "1")
    assert before.returncode == 0, before.stderr
    assert "on the old runtime" in before.stdout
    assert IngressBinding.objects.filter(session=source, channel="cli", active=True).count() == 1

    migration = cut_over(cast, source, target)
    after = tess("stream", str(source.pk), "--tail", "1", "--max-events", "1")

    assert after.returncode == 0, after.stderr
    said, event = after.stdout.splitlines()[0], after.stdout.splitlines()[-1]
    assert said == (
        f"Session {source.pk} was cut over to session {target.pk} (migration {migration}): "
        f"this profile now uses {target.pk}."
    )
    assert "Cut over from session" in event  # the new session's stream, not the old one's


def test_a_stream_running_during_a_cutover_follows_it_live(cast, tess):
    source, target = two_sessions(cast)
    tess.login("owner")
    process = tess.popen("stream", str(source.pk))
    try:
        read_until(process, "on the old runtime")
        wait_for(
            lambda: IngressBinding.objects.filter(session=source, channel="cli", active=True).exists(),
            "the profile's binding",
        )

        migration = cut_over(cast, source, target)
        shown = read_until(process, "Cut over from session")
        services.event_append(session_id=target.pk, kind=EventKind.SYSTEM, body=system_body(text="later, new"))
        later = read_until(process, "later, new")
    finally:
        process.kill()
        process.wait(timeout=30)

    assert f"was cut over to session {target.pk} (migration {migration}): this profile now uses {target.pk}" in (
        "".join(shown)
    )
    assert [line for line in later if "later, new" in line] == later[-1:]
