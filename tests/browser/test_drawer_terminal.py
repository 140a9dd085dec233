"""The drawer's terminal in a real browser: what a program in a real tmux pane draws, read back cell by cell
from xterm.js's buffer (text, colour, position); the screen of a full-screen program opened after it drew;
keystrokes that reach the pane exactly once when interactive, and none when read-only."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from providers_app.registry import get_provider, reset_instances
from providers_app.tmux import TmuxProvider
from sessions_app import services
from sessions_app.models import InboxItem, Session
from tests.browser.conftest import (
    ARTIFACTS,
    log_in,
    off_the_browser_loop,
    provider_config,
    terminal_cell,
    terminal_lines,
    wait_for_terminal_text,
)
from tests.conftest import Cast, scope_of
from tests.tess_site.children import ROOT
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

# Waits for a file, then clears the screen and draws at given places: red at row 5, column 10; bold green
# at row 8, column 3; a blue background at row 10. Then it sleeps, the cursor left at row 12, column 7.
DRAW = r"""while [ ! -e "$1/go" ]; do sleep 0.1; done
printf '\033[2J\033[5;10H\033[31mRED\033[0m\033[8;3H\033[1;32mGREEN\033[0m'
printf '\033[10;1H\033[44;37m BLUE BAR \033[0m\033[12;7H'
sleep 600
"""
# A full-screen program: the alternate screen, a bar and a word drawn once, then only a counter at the
# bottom, again and again: the stream's tail has the counter alone.
FULL_SCREEN = r"""printf '\033[?1049h\033[2J\033[1;1H\033[44m TOP BAR \033[0m\033[12;20H\033[33mMIDDLE\033[0m'
i=0; while [ $i -lt 100000 ]; do i=$((i+1)); printf '\033[24;1H%s' "$i"; sleep 0.01; done
sleep 600
"""
# Reads lines with the terminal's echo off, so each line the program got shows exactly once.
READER = 'stty -echo; while IFS= read -r line; do echo "got:$line"; done'


def _session(cast: Cast, demo_tmux: Any, settings: Any, argv: list[str], title: str) -> Session:
    settings.TESS_RUNTIME_PROVIDERS = provider_config(demo_tmux)
    reset_instances()
    scope = scope_of(cast.owner, cast.acme)
    provider = get_provider("demo")
    assert isinstance(provider, TmuxProvider)
    runtime = provider.start_command(scope, title=title, argv=argv)
    return services.session_bind_started(scope=scope, owner=cast.owner, runtime=runtime, title=title)


def _open(page: Any, session: Session) -> None:
    page.evaluate("id => localStorage.setItem('tess.drawer.session', id)", str(session.pk))
    page.reload()
    page.get_by_role("button", name="Tess", exact=True).click()
    expect(page.locator("#tess-session")).to_have_value(str(session.pk))
    expect(page.locator("#tess-connection")).to_have_text("Live")
    expect(page.locator("#tess-output[data-ready]")).to_have_count(1)


def _pane(demo_tmux: Any, session: Session) -> str:
    return demo_tmux.tmux("capture-pane", "-p", "-t", session.runtime_id)


def test_coloured_cursor_positioned_output_is_drawn_where_and_as_the_program_put_it(
    cast: Cast, demo_tmux: Any, settings: Any, open_browser: Any, tmp_path: Path
) -> None:
    script = tmp_path / "draw.sh"
    script.write_text(DRAW)
    session = _session(cast, demo_tmux, settings, ["sh", str(script), str(tmp_path)], "drawing")
    page = open_browser()
    log_in(page, cast.owner)
    _open(page, session)
    (tmp_path / "go").touch()  # drawn now, live, with the drawer open
    wait_for_terminal_text(page, "GREEN")

    assert page.evaluate("() => [window.Tess.terminal.cols, window.Tess.terminal.rows]") == [80, 24]  # the pane's
    for x, char in enumerate("RED", start=9):
        assert terminal_cell(page, x, 4) == {"char": char, "fg": 1, "bg": "default", "bold": False}
    for x, char in enumerate("GREEN", start=2):
        assert terminal_cell(page, x, 7) == {"char": char, "fg": 2, "bg": "default", "bold": True}
    assert terminal_cell(page, 1, 9) == {"char": "B", "fg": 7, "bg": 4, "bold": False}
    assert terminal_cell(page, 0, 9) == {"char": " ", "fg": 7, "bg": 4, "bold": False}  # the bar's blue
    assert (terminal_cell(page, 10, 9) or {}).get("bg") == "default"  # and nothing after it
    assert (terminal_cell(page, 8, 4) or {}).get("char") == ""  # the cleared screen around the drawing
    lines = terminal_lines(page)
    assert lines[4] == " " * 9 + "RED" and lines[7] == "  GREEN"
    assert "\x1b" not in "".join(lines) and "[31m" not in "".join(lines)  # no escape codes as text
    cursor = page.evaluate(
        "() => [window.Tess.terminal.buffer.active.cursorX, window.Tess.terminal.buffer.active.cursorY]"
    )
    assert cursor == [6, 11]
    output = page.get_by_label("Live output of the selected session")
    expect(output).to_contain_text("RED")  # what the page shows, too (xterm.js draws rows as text)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "drawer-terminal.png"))
    output.screenshot(path=str(ARTIFACTS / "drawer-terminal-output.png"))


def test_a_full_screen_program_opened_after_it_drew_shows_its_screen(
    cast: Cast, demo_tmux: Any, settings: Any, open_browser: Any, tmp_path: Path
) -> None:
    script = tmp_path / "full.sh"
    script.write_text(FULL_SCREEN)
    session = _session(cast, demo_tmux, settings, ["sh", str(script)], "full screen")

    def many_events() -> int:
        # More counter updates than the drawer's tail holds (200 events), pumped as they come.
        def enough() -> bool:
            services.session_pump(session_id=session.pk)
            time.sleep(0.02)
            return Session.objects.get(pk=session.pk).last_seq > 300

        assert wait_for(enough, timeout=60)
        return Session.objects.get(pk=session.pk).last_seq

    last = off_the_browser_loop(many_events)
    tail = "".join(
        e.body["data"] for e in Session.objects.get(pk=session.pk).events.filter(seq__gt=last - 200, kind="output")
    )
    assert "MIDDLE" not in tail and "TOP BAR" not in tail  # the tail alone cannot show the screen

    page = open_browser()
    log_in(page, cast.owner)
    _open(page, session)
    wait_for_terminal_text(page, "MIDDLE")
    assert page.evaluate("() => window.Tess.terminal.buffer.active.type") == "alternate"
    assert terminal_cell(page, 1, 0) == {"char": "T", "fg": "default", "bg": 4, "bold": False}
    for x, char in enumerate("MIDDLE", start=19):
        assert terminal_cell(page, x, 11) == {"char": char, "fg": 3, "bg": "default", "bold": False}
    counter = int(re.match(r"\d+", terminal_lines(page)[23]).group())  # type: ignore[union-attr]
    page.wait_for_function(
        "n => parseInt(window.Tess.terminal.buffer.active.getLine(window.Tess.terminal.buffer.active.baseY + 23)"
        ".translateToString(true)) > n",
        arg=counter,
    )  # and it goes on live from there
    assert terminal_lines(page)[11] == " " * 19 + "MIDDLE"


def test_keystrokes_reach_the_pane_once_when_interactive_and_never_when_read_only(
    cast: Cast, demo_tmux: Any, settings: Any, open_browser: Any
) -> None:
    session = _session(cast, demo_tmux, settings, ["sh", "-c", READER], "reader")
    page = open_browser()
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" and "/sessions/" in r.url else None)
    log_in(page, cast.owner)
    _open(page, session)
    output = page.get_by_label("Live output of the selected session")
    toggle = page.get_by_role("button", name="Interactive")
    expect(toggle).to_have_attribute("aria-pressed", "false")

    output.click()  # read-only: typing into the terminal sends nothing (checked below: the first keys are "hello")
    page.keyboard.type("nope")
    page.keyboard.press("Enter")

    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    page.keyboard.type("hello world")
    page.keyboard.press("Enter")
    wait_for_terminal_text(page, "got:hello world")
    assert wait_for(lambda: "got:hello world" in _pane(demo_tmux, session), timeout=10)
    page.keyboard.press("Escape")  # the program's key while interactive: the drawer stays open
    expect(page.get_by_role("complementary", name="Tess")).to_be_visible()
    page.keyboard.press("Backspace")  # the line discipline drops the escape again (echo is off)
    page.keyboard.type("second")
    page.keyboard.press("Enter")
    wait_for_terminal_text(page, "got:second")
    pane = _pane(demo_tmux, session)
    assert pane.count("got:hello world") == 1 and pane.count("got:second") == 1
    assert "got:nope" not in pane and "got:nopehello" not in pane
    typed = "".join(item.text for item in InboxItem.objects.filter(session=session, keys=True).order_by("pk"))
    assert typed == "hello world\r\x1b\x7fsecond\r"  # every key once, in order, nothing added, nothing read-only
    assert (
        len([url for url in posts if url.endswith("/messages/")]) == InboxItem.objects.filter(session=session).count()
    )

    toggle.click()  # read-only again: keys stop
    expect(toggle).to_have_attribute("aria-pressed", "false")
    output.click()
    page.keyboard.type("after")
    page.keyboard.press("Enter")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    page.keyboard.type("last")
    page.keyboard.press("Enter")
    wait_for_terminal_text(page, "got:last")
    typed = "".join(item.text for item in InboxItem.objects.filter(session=session, keys=True).order_by("pk"))
    assert typed == "hello world\r\x1b\x7fsecond\rlast\r"
    assert "got:after" not in _pane(demo_tmux, session)


# A coding agent's screen, as such a program draws it: a title bar, coloured results, a diff, a question.
AGENT_SCREEN = r"""printf '\033[2J\033[H\033[7m %-68s step 3/5 \033[0m\r\n\r\n' 'agent: refactor billing'
printf '\033[1mRunning tests\033[0m\r\n'
printf '  \033[32m✓\033[0m billing/invoice_test.py   \033[2m12 passed\033[0m\r\n'
printf '  \033[32m✓\033[0m billing/tax_test.py       \033[2m 7 passed\033[0m\r\n'
printf '  \033[33m!\033[0m billing/legacy_test.py    \033[33m2 warnings\033[0m\r\n\r\n'
printf '\033[1mProposed change\033[0m  billing/invoice.py\r\n'
printf '\033[36m@@ -41,3 +41,3 @@\033[0m\r\n'
printf '\033[31m-    total = sum(line.amount for line in lines)\033[0m\r\n'
printf '\033[32m+    total = sum((line.amount for line in lines), Decimal(0))\033[0m\r\n\r\n'
printf 'Apply this change? [y/N] '
sleep 600
"""


@pytest.mark.parametrize(
    ("width", "height", "scheme"), [(1280, 1100, "light"), (1280, 1100, "dark"), (390, 844, "light")]
)
def test_the_drawer_with_its_terminal_pictured(
    cast: Cast, demo_tmux: Any, settings: Any, open_browser: Any, tmp_path: Path, width: int, height: int, scheme: str
) -> None:
    script = tmp_path / "agent.sh"
    script.write_text(AGENT_SCREEN)
    session = _session(cast, demo_tmux, settings, ["bash", str(script)], "refactor billing")
    assert wait_for(lambda: "Apply this change" in _pane(demo_tmux, session), timeout=15)
    page = open_browser(width=width, height=height, color_scheme=scheme)
    log_in(page, cast.owner)
    _open(page, session)
    wait_for_terminal_text(page, "Apply this change? [y/N]")
    assert terminal_cell(page, 2, 4) == {"char": "✓", "fg": 2, "bg": "default", "bold": False}
    box = page.get_by_label("Message Tess (Enter sends, Shift+Enter adds a line)")
    box.fill("remember the deploy window is Tuesdays")
    box.press("Enter")
    expect(page.locator(".tess-card-memory")).to_have_count(1)
    expect(page.locator("#tess-session-state")).to_contain_text("Agent: waiting for input", timeout=30_000)
    path = ARTIFACTS / f"drawer-terminal-{width}-{scheme}.png"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#tess-output").scroll_into_view_if_needed()
    page.screenshot(path=str(path))
    if (width, scheme) == (1280, "light"):
        shutil.copyfile(path, ROOT / "docs" / "drawer.png")


def test_a_runtime_without_a_screen_has_its_text_written_line_by_line_and_no_keys(
    cast: Cast, demo_session: Session, open_browser: Any
) -> None:
    from sessions_app import journal, stream
    from tests.factories import SessionFactory

    def chat() -> Session:
        # A runtime whose output is text, not a terminal's (pi, Hermes, Matrix): lines end with LF alone.
        session = SessionFactory.create(owner=cast.owner, tenant=cast.acme, title="chat", provider_instance="pi-main")
        body = stream.output_body(data="first line\nsecond \x1b[1mline\x1b[0m\n", source="", cursor="", next_cursor="")
        journal.events_append(session_id=session.pk, items=[(stream.EventKind.OUTPUT, body)])
        return session

    session = off_the_browser_loop(chat)
    page = open_browser()
    log_in(page, cast.owner)
    page.evaluate("id => localStorage.setItem('tess.drawer.session', id)", str(session.pk))
    page.reload()
    page.get_by_role("button", name="Tess", exact=True).click()
    expect(page.locator("#tess-output[data-ready]")).to_have_count(1)
    wait_for_terminal_text(page, "second line")
    assert terminal_lines(page, scrollback=True)[:2] == ["first line", "second line"]  # no staircase
    assert (terminal_cell(page, 7, 1) or {}).get("bold") is True
    expect(page.get_by_role("button", name="Interactive")).to_be_hidden()
