"""Runtime checkpoints: written behind the durable inbox/state capability, and recovered from when the runtime
rewrites its stream under the session's cursor (seed 001, "checkpoint", "compaction recovery")."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from providers_app.capabilities import CapabilityName, capability
from providers_app.contract import CapabilityUnsupported, CursorLost
from providers_app.pi_rpc import RpcProcess
from providers_app.registry import get_provider, reset_instances
from sessions_app import services
from sessions_app.models import Session, SessionEvent
from tess_site.audit.models import AuditEvent
from tess_site.errors import Forbidden, NotFound
from tests.conftest import Cast, require_or_skip, scope_of
from tests.providers_app.pi_writer import PiSessionWriter

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
PI_EXECUTABLE = Path(os.environ.get("TESS_PI_EXECUTABLE", REPO / "var" / "node" / "node_modules" / ".bin" / "pi"))
SUMMARY = "Refactored the parser for payroll-migration; next: the lexer."


def output_of(session: Session) -> list[tuple[str, str]]:
    """Every output event's (entry id, text), in stream order."""
    return [
        (e.body["source"], e.body["data"])
        for e in SessionEvent.objects.filter(session=session, kind="output").order_by("seq")
    ]


def system_codes(session: Session) -> list[str]:
    return [e.body["code"] for e in SessionEvent.objects.filter(session=session, kind="system").order_by("seq")]


def pump_dry(session: Session, *, limit: int = 65536) -> None:
    while services.session_pump(session_id=session.pk, limit=limit):
        pass


@pytest.fixture
def pi_dir(settings: Any, tmp_path: Path) -> Iterator[Path]:
    pi1 = {"kind": "pi", "sessions_dir": str(tmp_path / "pi")}
    settings.TESS_RUNTIME_PROVIDERS = {**(settings.TESS_RUNTIME_PROVIDERS or {}), "pi1": pi1}
    reset_instances()
    yield tmp_path / "pi"
    reset_instances()


def adopt(cast: Cast, writer: PiSessionWriter) -> Session:
    admin = scope_of(cast.admin_user, cast.acme)
    [runtime] = [r for r in get_provider("pi1").list_sessions(admin) if r.ref.runtime_id == writer.id]
    return services.session_adopt(
        scope=admin, instance="pi1", runtime_id=runtime.ref.runtime_id, assignee="owner", title="pi work"
    )


def as_version_2(writer: PiSessionWriter) -> None:
    """A session file as an older pi wrote it (version 2), which the current pi migrates, and so rewrites,
    when it opens it."""
    lines = writer.path.read_text().splitlines()
    header = json.loads(lines[0]) | {"version": 2}
    writer.path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")


# --- recovery ------------------------------------------------------------------------------------------


def test_a_restart_in_the_middle_of_a_compacted_pi_session_resumes_from_the_checkpoint(
    cast: Cast, pi_dir: Path, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    if not PI_EXECUTABLE.exists():
        require_or_skip(f"PI EXECUTABLE NOT INSTALLED at {PI_EXECUTABLE}: run tests/providers_app/install_pi.sh")
    writer = PiSessionWriter(pi_dir)
    writer.name("parser work")
    first = writer.user("Refactor the parser")
    writer.assistant("Done; the tests pass.")
    compaction = writer.compaction(SUMMARY, first_kept=first)
    writer.user("Now the lexer, please.")
    writer.assistant("The lexer tokenises numbers, strings and comments now; 31 tests pass.")
    as_version_2(writer)
    session = adopt(cast, writer)

    # Tess reads past the compaction and stops inside the last answer (a small page), then stops itself.
    with django_capture_on_commit_callbacks(execute=True):
        services.session_pump(session_id=session.pk, limit=len("Refactor the parser\nDone; the tests pass.\n") + 40)
    session.refresh_from_db()
    assert session.checkpoint["entry_id"] == compaction and session.checkpoint["cursor"]
    read_before = "".join(text for _, text in output_of(session))
    assert read_before.startswith("Refactor the parser\nDone; the tests pass.\nNow the lexer, please.\nThe lexer")
    assert not read_before.endswith("31 tests pass.\n")
    reset_instances()  # Tess restarts: no provider keeps anything in memory

    # Meanwhile the real pi opens the session: it migrates the file to version 3 and rewrites it whole.
    home = {"HOME": str(tmp_path / "home"), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    rpc = RpcProcess(
        [str(PI_EXECUTABLE), "--mode", "rpc", "--session", str(writer.path)],
        cwd=str(tmp_path),
        env={**os.environ, **home},
        timeout=30,
    )
    try:
        assert rpc.command({"type": "get_state"})["sessionId"] == writer.id
    finally:
        rpc.close()
    assert json.loads(writer.path.read_text().splitlines()[0])["version"] == 3  # pi rewrote it
    later = writer.assistant("And after the restart: the lexer handles escapes.")

    with django_capture_on_commit_callbacks(execute=True):
        pump_dry(session)

    session.refresh_from_db()
    texts = "".join(text for _, text in output_of(session))
    assert texts == (
        "Refactor the parser\nDone; the tests pass.\nNow the lexer, please.\n"
        "The lexer tokenises numbers, strings and comments now; 31 tests pass.\n"
        "And after the restart: the lexer handles escapes.\n"
    )
    assert output_of(session)[-1] == (later, "And after the restart: the lexer handles escapes.\n")
    assert system_codes(session).count("checkpoint.resumed") == 1
    assert system_codes(session).count("checkpoint") == 1  # the compaction is not recorded again
    assert session.cursor.endswith("." + later)


def test_without_a_checkpoint_a_lost_cursor_is_not_read_from(cast: Cast, pi_dir: Path) -> None:
    writer = PiSessionWriter(pi_dir)
    writer.user("one")
    writer.assistant("two")
    session = adopt(cast, writer)
    services.session_pump(session_id=session.pk, limit=3)
    session.refresh_from_db()
    cursor = session.cursor
    writer.path.write_text(
        "".join(
            json.dumps(json.loads(line), separators=(",", ":")) + "\n" for line in writer.path.read_text().splitlines()
        )
    )

    with pytest.raises(CursorLost):
        services.session_pump(session_id=session.pk)

    session.refresh_from_db()
    assert session.cursor == cursor and [text for _, text in output_of(session)] == ["one"]


# --- writing through the capability -------------------------------------------------------------------


def test_the_owner_writes_a_checkpoint_with_its_cursor_behind_the_capability(
    cast: Cast, pi_dir: Path, django_capture_on_commit_callbacks: Any
) -> None:
    writer = PiSessionWriter(pi_dir)
    kept = writer.user("Refactor the parser")
    writer.assistant("Done.")
    session = adopt(cast, writer)
    services.session_pump(session_id=session.pk)
    session.refresh_from_db()
    write = capability(CapabilityName.DURABLE_INBOX_STATE).operation("checkpoint_write")
    given = {"kind": "handover", "entry_id": kept, "summary": SUMMARY, "first_kept_entry_id": kept}

    with django_capture_on_commit_callbacks(execute=True):
        written = write(scope_of(cast.owner, cast.acme), session_id=session.pk, checkpoint=given, cursor=session.cursor)

    session.refresh_from_db()
    assert written["checkpoint"] == session.checkpoint == {**given, "tokens_before": None, "cursor": session.cursor}
    read = capability(CapabilityName.DURABLE_INBOX_STATE).operation("checkpoint")
    assert read(scope_of(cast.owner, cast.acme), session_id=session.pk)["checkpoint"]["cursor"] == session.cursor
    assert system_codes(session)[0] == "checkpoint"
    audit = AuditEvent.objects.get(action="session.checkpoint", target_id=str(session.pk))
    assert audit.metadata == {
        "kind": "handover",
        "entry_id": kept,
        "first_kept_entry_id": kept,
        "cursor": session.cursor,
    }


def test_checkpoint_writes_are_refused_to_others_and_to_providers_without_checkpoints(
    cast: Cast, start_session: Any, pi_dir: Path
) -> None:
    writer = PiSessionWriter(pi_dir)
    kept = writer.user("x")
    session = adopt(cast, writer)
    write = capability(CapabilityName.DURABLE_INBOX_STATE).operation("checkpoint_write")
    given = {"kind": "handover", "entry_id": kept, "summary": ""}

    with pytest.raises(NotFound):
        write(scope_of(cast.outsider, cast.globex), session_id=session.pk, checkpoint=given, cursor="0.0")
    services.session_grant(scope=scope_of(cast.owner, cast.acme), session_id=session.pk, grantee=cast.teammate)
    with pytest.raises(Forbidden):  # a reader (even one who may operate it) does not write its state
        write(scope_of(cast.teammate, cast.acme), session_id=session.pk, checkpoint=given, cursor="0.0")
    with pytest.raises(CursorLost):
        write(scope_of(cast.owner, cast.acme), session_id=session.pk, checkpoint=given, cursor="3.0")
    tmux_session = start_session(title="terminal")
    with pytest.raises(CapabilityUnsupported):
        write(scope_of(cast.owner, cast.acme), session_id=tmux_session.pk, checkpoint=given, cursor="0")
    assert not AuditEvent.objects.filter(action="session.checkpoint").exists()
    assert Session.objects.get(pk=session.pk).checkpoint == {}


def test_auditors_see_checkpoint_writes_in_the_admin_by_ids_only(
    cast: Cast, pi_dir: Path, django_capture_on_commit_callbacks: Any
) -> None:
    writer = PiSessionWriter(pi_dir)
    first = writer.user("Refactor the parser")
    compaction = writer.compaction(SUMMARY, first_kept=first)
    session = adopt(cast, writer)
    with django_capture_on_commit_callbacks(execute=True):
        services.session_pump(session_id=session.pk)
    client = Client()
    client.force_login(cast.auditor)

    page = client.get(reverse("admin:audit_auditevent_changelist"), {"q": "session.checkpoint"})
    event = AuditEvent.objects.get(action="session.checkpoint")
    detail = client.get(reverse("admin:audit_auditevent_change", args=[event.pk]))

    assert page.status_code == 200 and detail.status_code == 200
    for response in (page, detail):
        text = response.content.decode()
        assert "payroll-migration" not in text and "lexer" not in text
    assert compaction in detail.content.decode() and "session.checkpoint" in page.content.decode()
