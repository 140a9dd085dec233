"""Running scripted programs in real tmux sessions bound to Tess sessions, and reading the states announced."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

from providers_app.registry import get_provider, reset_instances
from providers_app.tmux import TmuxProvider
from sessions_app import services
from sessions_app.models import Session
from tests.conftest import Cast, scope_of
from tests.waiting import wait_for

from .conftest import TmuxInstance

_names = itertools.count(1)


def configure(settings: Any, tmux: TmuxInstance, **extra: Any) -> TmuxProvider:
    settings.TESS_RUNTIME_PROVIDERS = {"alpha": tmux.config(**extra)}
    reset_instances()
    provider = get_provider("alpha")
    assert isinstance(provider, TmuxProvider)
    return provider


def run_script(cast: Cast, provider: TmuxProvider, workdir: Path, script: str, *, remain: bool = False) -> Session:
    """Start ``bash <script> <workdir>`` in a new tmux session and bind it to the owner."""
    number = next(_names)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"script-{number}.sh"
    path.write_text(script)
    scope = scope_of(cast.owner, cast.acme)
    runtime = provider.start_command(scope, title=f"agent-{number}", argv=["bash", str(path), str(workdir)])
    if remain:
        provider.cli.run("set-option", "-w", "-t", runtime.ref.runtime_id, "remain-on-exit", "on")
    return services.session_bind_started(scope=scope, owner=cast.owner, runtime=runtime, title=f"agent-{number}")


def announced(session: Session) -> list[str]:
    """The agent states announced by ``status`` events, in order (the binding's own event excluded)."""
    bodies = [e.body for e in session.events.filter(kind="status").order_by("seq")]
    return [body["agent_state"] for body in bodies[1:]]


def pump_until(session: Session, check: Any, what: str, timeout: float = 30.0) -> Session:
    def step() -> Session | None:
        services.session_pump(session_id=session.pk)
        fresh = Session.objects.get(pk=session.pk)
        return fresh if check(fresh) else None

    return wait_for(step, what, timeout=timeout, interval=0.05)


def pump_until_state(session: Session, state: str, timeout: float = 30.0) -> Session:
    return pump_until(session, lambda s: s.agent_state == state, f"agent state {state}", timeout)


def pump_for(sessions: list[Session], seconds: float) -> None:
    """Pump the sessions for a while (watching that nothing is announced that should not be)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for session in sessions:
            services.session_pump(session_id=session.pk)
        time.sleep(0.05)


WORK = 'while [ ! -e "$1/{flag}" ]; do echo "working on step $((i=i+1))"; sleep 0.2; done\n'
