"""What only the tmux provider promises: exact ids, identity across restarts, the pane-log copy, its server."""

from __future__ import annotations

import dataclasses
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from providers_app import tmux as tmux_module
from providers_app.contract import (
    AttachMode,
    CapabilityUnsupported,
    Operation,
    ProviderUnavailable,
    RuntimeNotFound,
    RuntimeRef,
)
from providers_app.tmux import TmuxProvider
from tess_site.scope import Scope
from tests.waiting import wait_for

from .conftest import PEER, TmuxHarness, active_pane, tmux
from .test_contract import read_to_the_end, read_until

MakeTmux = Callable[..., TmuxHarness]


def pane_pipes(harness: TmuxHarness) -> list[str]:
    return tmux(harness.socket, "list-panes", "-a", "-F", "#{pane_pipe}").split()


def stream_text(harness: TmuxHarness, ref: RuntimeRef, scope: Scope, cursor: str | None = None) -> str:
    return "".join(chunk.data for chunk in harness.provider.stream_session(ref, cursor, scope).chunks)


# --- exact targets and identity ----------------------------------------------------------------------


def test_targets_are_exact_ids_never_name_prefixes(make_tmux: MakeTmux, system_scope: Scope) -> None:
    harness = make_tmux()
    longer = harness.start(system_scope, "webapp")
    shorter = harness.start(system_scope, "web")
    harness.provider.terminate(shorter, "approval-1", system_scope)

    # tmux itself would resolve "web" to "webapp" now; the stale reference must not.
    assert tmux(harness.socket, "display-message", "-p", "-t", "web", "#{session_id}").strip() == longer.runtime_id
    with pytest.raises(RuntimeNotFound):
        harness.provider.send_message(shorter, "rm -rf", "key-1", system_scope)
    assert [s.ref for s in harness.provider.list_sessions(system_scope)] == [longer]
    assert harness.received(longer) == ""


def test_a_recycled_session_id_on_a_restarted_server_is_not_the_old_session(
    make_tmux: MakeTmux, system_scope: Scope
) -> None:
    harness = make_tmux()
    old = harness.start(system_scope, "alpha")
    harness.emit(old, b"old output")
    read_until(harness.provider, old, system_scope, None, len(b"old output"), limit=64)
    tmux(harness.socket, "kill-server")
    new = harness.start(system_scope, "alpha")
    harness.emit(new, b"new output")

    assert new.runtime_id == old.runtime_id
    assert new.identity["server_pid"] != old.identity["server_pid"]
    for call in (
        lambda: harness.provider.send_message(old, "hi", "key-1", system_scope),
        lambda: harness.provider.attach(old, AttachMode.INTERACTIVE, system_scope),
        lambda: harness.provider.get_session_tree(system_scope, old),
        lambda: harness.provider.terminate(old, "approval-1", system_scope),
    ):
        with pytest.raises(RuntimeNotFound):
            call()
    page = read_to_the_end(harness.provider, old, system_scope)
    assert "".join(chunk.data for chunk in page.chunks) == "old output"
    assert wait_for(lambda: stream_text(harness, new, system_scope), "new output") == "new output"


def _forged(ref: RuntimeRef, change: str) -> RuntimeRef:
    identity = dict(ref.identity)
    if change == "instance":
        return dataclasses.replace(ref, instance="other")
    if change == "socket":
        identity["socket"] = "/tmp/elsewhere.sock"
    elif change == "name instead of id":
        return dataclasses.replace(ref, runtime_id="alpha")
    elif change == "id with extra text":
        return dataclasses.replace(ref, runtime_id=ref.runtime_id + ":0")
    elif change == "pid":
        identity["server_pid"] = "1"
    elif change == "path in pid":
        identity["server_pid"] = "../../etc"
    elif change == "created":
        identity["session_created"] = str(int(identity["session_created"]) - 1)
    elif change == "no identity":
        identity = {}
    return dataclasses.replace(ref, identity=identity)


@pytest.mark.parametrize(
    "change",
    ["instance", "socket", "name instead of id", "id with extra text", "pid", "path in pid", "created", "no identity"],
)
def test_a_forged_reference_is_not_found(make_tmux: MakeTmux, system_scope: Scope, change: str) -> None:
    harness = make_tmux()
    ref = harness.start(system_scope, "alpha")
    forged = _forged(ref, change)

    with pytest.raises(RuntimeNotFound):
        harness.provider.send_message(forged, "hi", "key-1", system_scope)
    with pytest.raises(RuntimeNotFound):
        harness.provider.terminate(forged, "approval-1", system_scope)
    assert harness.received(ref) == ""
    assert [s.ref for s in harness.provider.list_sessions(system_scope)] == [ref]


# --- the output copy ---------------------------------------------------------------------------------


def test_listing_starts_the_copy_of_a_session_started_elsewhere_once(make_tmux: MakeTmux, system_scope: Scope) -> None:
    harness = make_tmux()
    tmux(
        harness.socket,
        "new-session",
        "-d",
        "-s",
        "outside",
        "--",
        sys.executable,
        str(PEER),
        str(harness.directory / "peer"),
    )
    assert pane_pipes(harness) == ["0"]

    for _ in range(3):  # "pipe-pane -o" toggles: listing again must not switch the copy off
        (session,) = harness.provider.list_sessions(system_scope)
    harness.emit(session.ref, b"seen")

    assert pane_pipes(harness) == ["1"]
    assert wait_for(lambda: stream_text(harness, session.ref, system_scope), "the output") == "seen"


def test_output_printed_at_once_by_a_new_session_is_not_lost(make_tmux: MakeTmux, system_scope: Scope) -> None:
    harness = make_tmux(command=["sh", "-c", "printf 'ready at once'; exec sleep 60"])
    ref = harness.start(system_scope, "eager")

    assert wait_for(lambda: stream_text(harness, ref, system_scope), "the first output") == "ready at once"


def test_a_session_whose_command_exits_ends_its_stream_after_all_its_output(
    make_tmux: MakeTmux, system_scope: Scope
) -> None:
    # The command exits when told to, after its output was seen: tmux drops a pipe's undelivered bytes
    # when it destroys a pane, so output in the very instant before an exit is not promised.
    harness = make_tmux(command=["sh", "-c", "stty -echo; printf 'all of it'; read _"])
    ref = harness.start(system_scope, "brief")
    read_until(harness.provider, ref, system_scope, None, len(b"all of it"), limit=64)
    assert not harness.provider.stream_session(ref, None, system_scope).ended

    harness.provider.send_message(ref, "", "key-1", system_scope)
    page = read_to_the_end(harness.provider, ref, system_scope)

    assert "".join(chunk.data for chunk in page.chunks) == "all of it"
    assert harness.provider.list_sessions(system_scope) == []


def test_the_copy_survives_a_restart_of_tess(make_tmux: MakeTmux, system_scope: Scope) -> None:
    harness = make_tmux()
    ref = harness.start(system_scope, "alpha")
    harness.emit(ref, b"before|")
    _, cursor = read_until(harness.provider, ref, system_scope, None, len(b"before|"), limit=64)
    restarted = TmuxProvider(name=harness.name, config=harness.config)
    harness.emit(ref, b"after")

    chunks, _ = read_until(restarted, ref, system_scope, cursor, len(b"after"), limit=64)

    assert "".join(chunk.data for chunk in chunks) == "after"
    assert pane_pipes(harness) == ["1"]


def split(harness: TmuxHarness, target: str, words: str, *, window: bool = False) -> str:
    """A new pane (or window) in ``target`` whose command prints ``words`` the moment it starts."""
    how = ["new-window"] if window else ["split-window"]
    command = ["sh", "-c", f"printf '{words}'; exec sleep 60"]
    return tmux(harness.socket, *how, "-P", "-F", "#{pane_id}", "-t", target, "--", *command).strip()


def test_new_panes_and_windows_are_copied_from_their_first_byte(make_tmux: MakeTmux, system_scope: Scope) -> None:
    harness = make_tmux()
    ref = harness.start(system_scope, "alpha")
    first = active_pane(harness.socket, ref.runtime_id)
    harness.emit(ref, b"left")
    _, cursor = read_until(harness.provider, ref, system_scope, None, 4, limit=64)

    second = split(harness, ref.runtime_id, "first words")
    third = split(harness, ref.runtime_id, "window wörds", window=True)
    harness.emit_to_pane(first, b" more")
    size = len(" more") + len("first words") + len("window wörds".encode())
    chunks, _ = read_until(harness.provider, ref, system_scope, cursor, size, 64)

    by_pane = {pane: "".join(c.data for c in chunks if c.source == pane) for pane in (first, second, third)}
    assert by_pane == {first: " more", second: "first words", third: "window wörds"}
    assert pane_pipes(harness) == ["1", "1", "1"]


def test_a_listed_session_copies_its_new_panes_and_keeps_its_own_hooks(
    make_tmux: MakeTmux, system_scope: Scope
) -> None:
    harness = make_tmux(command=[])
    tmux(harness.socket, "new-session", "-d", "-s", "outside", "--", "sleep", "60")
    tmux(harness.socket, "set-hook", "-t", "outside", "after-split-window", "set-option @theirs yes")
    (session,) = harness.provider.list_sessions(system_scope)

    pane = split(harness, session.ref.runtime_id, "exact")

    chunks, _ = read_until(harness.provider, session.ref, system_scope, None, len("exact"), 64)
    assert [(c.source, c.data) for c in chunks] == [(pane, "exact")]
    assert tmux(harness.socket, "show-option", "-v", "-t", "outside", "@theirs").strip() == "yes"


def test_the_logs_are_private_and_paths_with_spaces_and_hashes_work(
    make_tmux: MakeTmux, system_scope: Scope, tmp_path: Path
) -> None:
    log_dir = tmp_path / 'odd #{pid} $HOME "dir\'s" \\ logs'
    harness = make_tmux(log_dir=str(log_dir))
    ref = harness.start(system_scope, "alpha")
    harness.emit(ref, b"fine")
    split(harness, ref.runtime_id, "also")

    chunks, _ = read_until(harness.provider, ref, system_scope, None, len("fine") + len("also"), 64)
    assert sorted(chunk.data for chunk in chunks) == ["also", "fine"]
    logs = list(log_dir.glob("*/*.log"))
    assert len(logs) == 2
    assert all(stat.S_IMODE(log.stat().st_mode) == 0o600 for log in logs)
    assert stat.S_IMODE(logs[0].parent.stat().st_mode) == 0o700


# --- send, start, configuration ----------------------------------------------------------------------


def test_a_long_message_starting_with_a_dash_arrives_whole(
    make_tmux: MakeTmux, system_scope: Scope, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tmux_module, "SEND_KEYS_CHUNK", 64)
    harness = make_tmux()
    ref = harness.start(system_scope, "alpha")
    message = "-n ;" + "ü".join(str(n) for n in range(300))

    result = harness.provider.send_message(ref, message, "key-1", system_scope)

    assert wait_for(lambda: harness.received(ref), "the message") == message + "\n"
    assert (result.delivered, result.replayed) == (True, False)


@pytest.mark.parametrize(
    ("message", "piece"),
    [("ls;", 4000), ("echo a \\;", 4000), (";", 4000), ("a;;", 4000), ("two; words;", 4000), ("abc;def\\;ghi;", 4)],
)
def test_a_message_or_a_piece_ending_in_a_semicolon_arrives_exactly(
    make_tmux: MakeTmux, system_scope: Scope, monkeypatch: pytest.MonkeyPatch, message: str, piece: int
) -> None:
    # tmux ends a command at an argument ending in ";" and unescapes a final "\\;": neither may touch the text.
    monkeypatch.setattr(tmux_module, "SEND_KEYS_CHUNK", piece)  # 4: the last message's pieces end in ";" or a backslash
    harness = make_tmux()
    ref = harness.start(system_scope, "alpha")
    harness.provider.send_message(ref, message, "key-1", system_scope)
    assert wait_for(lambda: harness.received(ref), "the message") == message + "\n"


def test_a_retried_key_types_nothing_and_says_replayed_a_new_key_types_again(
    make_tmux: MakeTmux, system_scope: Scope
) -> None:
    harness = make_tmux()
    ref = harness.start(system_scope, "alpha")
    first = harness.provider.send_message(ref, "rm -i build", "key-1", system_scope)
    again = harness.provider.send_message(ref, "rm -i build", "key-1", system_scope)
    other = harness.provider.send_message(ref, "rm -i build", "key-2", system_scope)
    assert (first.replayed, again.replayed, other.replayed) == (False, True, False)
    assert again.provider_message_id == first.provider_message_id
    expected = "rm -i build\nrm -i build\n"
    assert wait_for(lambda: harness.received(ref) if harness.received(ref) == expected else "", "both") == expected
    # The mark lives in the tmux session: a provider object made afresh (another worker) sees it too.
    fresh = TmuxProvider(name=harness.name, config=harness.config)
    assert fresh.send_message(ref, "rm -i build", "key-2", system_scope).replayed


def test_without_a_configured_command_it_cannot_start_sessions(make_tmux: MakeTmux, system_scope: Scope) -> None:
    harness = make_tmux(command=[])

    assert not harness.provider.capabilities().supports(Operation.START)
    with pytest.raises(CapabilityUnsupported):
        harness.provider.start_session(system_scope, title="alpha")
    assert harness.provider.list_sessions(system_scope) == []


def test_titles_become_unique_safe_session_names(make_tmux: MakeTmux, system_scope: Scope) -> None:
    harness = make_tmux()
    first = harness.provider.start_session(system_scope, title="my:odd.title")
    second = harness.provider.start_session(system_scope, title="my:odd.title")

    assert (first.title, second.title) == ("my_odd_title", "my_odd_title-2")
    assert {s.ref.runtime_id for s in harness.provider.list_sessions(system_scope)} == {
        first.ref.runtime_id,
        second.ref.runtime_id,
    }


def test_relative_paths_live_under_the_var_dir(settings: object, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path  # type: ignore[attr-defined]
    provider = TmuxProvider(name="local", config={"kind": "tmux", "socket": "local.sock"})

    assert provider.socket == tmp_path / "tmux" / "local.sock"
    assert provider.log_root == tmp_path / "tmux" / "local"


def test_a_socket_path_too_long_for_unix_sockets_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ImproperlyConfigured):
        TmuxProvider(name="local", config={"kind": "tmux", "socket": str(tmp_path / ("x" * 120))})


# --- the server --------------------------------------------------------------------------------------


def test_health_reports_the_heartbeat_of_server_and_panes(make_tmux: MakeTmux, system_scope: Scope) -> None:
    harness = make_tmux()
    ref = harness.start(system_scope, "alpha")
    harness.provider.list_sessions(system_scope)

    health = harness.provider.health()

    assert health.ok
    assert health.detail["server_alive"] is True
    assert health.detail["server_pid"] == int(ref.identity["server_pid"])
    assert (health.detail["sessions"], health.detail["panes"], health.detail["dead_panes"]) == (1, 1, 0)
    assert health.detail["piped_panes"] == 1
    assert health.detail["last_activity_at"]


def test_when_the_server_dies_its_streams_end_and_calls_are_unavailable(
    make_tmux: MakeTmux, system_scope: Scope
) -> None:
    harness = make_tmux()
    ref = harness.start(system_scope, "alpha")
    harness.emit(ref, b"before the end")
    read_until(harness.provider, ref, system_scope, None, len(b"before the end"), limit=64)

    tmux(harness.socket, "kill-server")

    page = read_to_the_end(harness.provider, ref, system_scope)
    assert "".join(chunk.data for chunk in page.chunks) == "before the end"
    with pytest.raises(ProviderUnavailable):
        harness.provider.send_message(ref, "hi", "key-1", system_scope)
    assert harness.provider.list_sessions(system_scope) == []
    health = harness.provider.health()
    assert health.ok and health.detail["server_alive"] is False


def _fake_tmux(tmp_path: Path, script: str) -> str:
    path = tmp_path / "fake-tmux"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o700)
    return str(path)


def test_a_server_that_does_not_answer_in_time_is_unavailable(tmp_path: Path, system_scope: Scope) -> None:
    binary = _fake_tmux(tmp_path, "exec sleep 30")
    provider = TmuxProvider(name="slow", config={"socket": str(tmp_path / "s"), "binary": binary, "timeout": 0.3})

    with pytest.raises(ProviderUnavailable):
        provider.list_sessions(system_scope)
    health = provider.health()
    assert not health.ok
    assert health.detail["error"] == "provider_unavailable"


def test_tmux_that_cannot_run_is_unavailable(tmp_path: Path, system_scope: Scope) -> None:
    provider = TmuxProvider(name="none", config={"socket": str(tmp_path / "s"), "binary": str(tmp_path / "missing")})

    with pytest.raises(ProviderUnavailable):
        provider.list_sessions(system_scope)
    assert not provider.health().ok
    assert not os.path.exists(tmp_path / "s")
