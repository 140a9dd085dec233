"""Browser tests: Debian's Chromium driven by Playwright against the real server.

The server is daphne in a child process on this test run's PostgreSQL database, configured like ``make run``
(in-process channel layer and tasks, the embedded pump) with a tmux instance whose session prints a tick
every 0.2 s. The browser is never downloaded: ``/usr/bin/chromium`` (``apt-get install chromium``).
Every test leaves a screenshot in ``var/test-artifacts/browser/``; every page is checked for requests to
other origins and Content-Security-Policy violations.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from providers_app.registry import reset_instances
from sessions_app import services
from sessions_app.models import Session
from tests.conftest import Cast, require_or_skip, scope_of
from tests.sessions_app.conftest import TmuxInstance, kill, make_instance
from tests.tess_site.children import ROOT, VENV_BIN, Child, child_env, free_port, serves_healthz
from tests.tess_site.conftest import start_child  # noqa: F401  (the module-scoped child fixture)
from tests.waiting import wait_for

CHROMIUM = os.environ.get("TESS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
]
ARTIFACTS = ROOT / "var" / "test-artifacts" / "browser"
TICK_COMMAND = ["sh", "-c", 'i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.2; done']

# Playwright's sync API keeps an event loop in this thread; the ORM calls the tests make between browser
# steps are plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

playwright_sync = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def demo_tmux() -> Iterator[TmuxInstance]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (apt-get install tmux)")
    instance = make_instance("browser")
    try:
        yield instance
    finally:
        kill(instance)


def provider_config(instance: TmuxInstance) -> dict[str, Any]:
    return {"demo": instance.config(command=TICK_COMMAND)}


@pytest.fixture(scope="module")
def tess_server(
    request: pytest.FixtureRequest,
    django_db_setup: None,
    demo_tmux: TmuxInstance,
    start_child: Callable[..., Child],  # noqa: F811
) -> str:
    """``http://127.0.0.1:<port>``: daphne as ``make run`` serves it, on the test database. A test module may
    set ``SERVER_ENV`` (a dict) to add to its server's environment."""
    port = free_port()
    env = child_env(
        TESS_RUNTIME_PROVIDERS=json.dumps(provider_config(demo_tmux)),
        TESS_STREAM_RECHECK_SECONDS="1",
        TESS_STREAM_HEARTBEAT_SECONDS="2",
        TESS_PUMP_INTERVAL_MS="100",
        TESS_PUBLIC_URL=f"http://127.0.0.1:{port}",  # approval links point at this server
        **getattr(request.module, "SERVER_ENV", {}),
    )
    env.pop("REDIS_URL", None)  # the embedded default: the server pumps output and runs tasks itself
    child = start_child(
        "daphne-browser",
        [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"],
        env,
    )
    if not wait_for(lambda: not child.alive() or serves_healthz(port), timeout=30):
        pytest.fail(f"daphne did not answer on port {port}:\n{child.output()}")
    if not child.alive():
        pytest.fail(f"daphne exited:\n{child.output()}")
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def demo_session(cast: Cast, demo_tmux: TmuxInstance, settings: Any) -> Iterator[Session]:
    """A real tmux session printing ticks, owned by the operator (``cast.owner``), like the demo session."""
    settings.TESS_RUNTIME_PROVIDERS = provider_config(demo_tmux)
    reset_instances()
    session = services.session_start(scope=scope_of(cast.owner, cast.acme), instance="demo", title="demo")
    try:
        yield session
    finally:
        reset_instances()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        require_or_skip(f"CHROMIUM IS NOT INSTALLED at {CHROMIUM}: apt-get install chromium (never downloaded)")
    # Playwright leaves its event loop set as running in this thread, and Django then keeps its connections
    # per context instead of per thread: a second connection object appears. It gets the suite's flush
    # (tests/conftest.py lets the test flush pass the audit triggers) and is closed before the database is.
    flush = connection.ops.sql_flush
    with playwright_sync.sync_playwright() as playwright:
        connection.ops.sql_flush = flush  # type: ignore[method-assign]
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()
            connection.close()


class Watched:
    """A browser context with its page, recording what a clean page must never do."""

    def __init__(self, context: Any, origin: str) -> None:
        self.context = context
        self.origin = origin
        self.page = context.new_page()
        self.foreign: list[str] = []
        self.csp: list[str] = []
        self.page.on("request", self._request)
        self.page.on("console", self._console)

    def _request(self, request: Any) -> None:
        url = request.url
        ours = (self.origin, self.origin.replace("http", "ws", 1), "data:", "blob:", "about:")
        if not url.startswith(ours):
            self.foreign.append(url)

    def _console(self, message: Any) -> None:
        if "Content Security Policy" in message.text or "Content-Security-Policy" in message.text:
            self.csp.append(message.text)


@pytest.fixture
def open_browser(browser: Any, tess_server: str, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Open a fresh context (``viewport``, ``color_scheme``) and return its page; screenshots at the end."""
    opened: list[Watched] = []

    def open_(width: int = 1280, height: int = 900, color_scheme: str = "light") -> Any:
        context = browser.new_context(
            base_url=tess_server, viewport={"width": width, "height": height}, color_scheme=color_scheme
        )
        watched = Watched(context, tess_server)
        opened.append(watched)
        return watched.page

    yield open_
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for index, watched in enumerate(opened):
        name = request.node.name + (f"-{index}" if index else "")
        try:
            watched.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=False)
        finally:
            watched.context.close()
    foreign = [url for w in opened for url in w.foreign]
    csp = [text for w in opened for text in w.csp]
    assert not foreign, f"requests left the server: {foreign}"
    assert not csp, f"Content-Security-Policy violations: {csp}"


def password_of(user: User) -> str:
    return f"{user.username}-pass-1234"  # tests/conftest.py's cast


def log_in(page: Any, user: User, path: str = "/admin/") -> None:
    page.goto(f"/admin/login/?next={path}")
    page.fill("#id_username", user.username)
    page.fill("#id_password", password_of(user))
    page.click("input[type=submit]")
    page.wait_for_url(f"**{path}")


def off_the_browser_loop(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a plain thread: code that pushes to the channel layer (``async_to_sync``) refuses to run
    in a thread where Playwright's event loop is set. The thread's database connection is closed after."""
    from concurrent.futures import ThreadPoolExecutor

    def run() -> Any:
        try:
            return fn()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()


# --- the drawer's terminal (xterm.js, exposed as window.Tess.terminal) -------------------------------------

TERMINAL_LINES = """({all}) => {
  const buffer = window.Tess.terminal.buffer.active;
  const first = all ? 0 : buffer.baseY;
  const last = all ? buffer.length : buffer.baseY + window.Tess.terminal.rows;
  const lines = [];
  for (let y = first; y < last; y++) lines.push(buffer.getLine(y)?.translateToString(true) ?? "");
  return lines;
}"""

TERMINAL_CELL = """([x, y]) => {
  const buffer = window.Tess.terminal.buffer.active;
  const cell = buffer.getLine(buffer.baseY + y)?.getCell(x);
  if (!cell) return null;
  return {
    char: cell.getChars(),
    fg: cell.isFgPalette() ? cell.getFgColor() : cell.isFgDefault() ? "default" : "rgb:" + cell.getFgColor(),
    bg: cell.isBgPalette() ? cell.getBgColor() : cell.isBgDefault() ? "default" : "rgb:" + cell.getBgColor(),
    bold: !!cell.isBold(),
  };
}"""


def terminal_lines(page: Any, *, scrollback: bool = False) -> list[str]:
    """The rows of the drawer's terminal as it draws them: the screen, or with ``scrollback`` every row."""
    return page.evaluate(TERMINAL_LINES, {"all": scrollback})


def terminal_cell(page: Any, x: int, y: int) -> dict[str, Any] | None:
    """The cell at column ``x``, row ``y`` of the screen (0-based): its text, colours (palette index) and bold."""
    return page.evaluate(TERMINAL_CELL, [x, y])


def wait_for_terminal_text(page: Any, text: str, *, timeout: float = 15_000, scrollback: bool = False) -> None:
    page.wait_for_function(
        f"([text, all]) => !!window.Tess?.terminal && ({TERMINAL_LINES})({{all}}).join('\\n').includes(text)",
        arg=[text, scrollback],
        timeout=timeout,
    )
