"""The CLI on a real tmux runtime: the session tree, attach --interactive, send, detach."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator

import pytest

from providers_app.registry import reset_instances
from sessions_app import services
from sessions_app.models import InboxItem
from tests.conftest import require_or_skip, scope_of
from tests.sessions_app.conftest import TmuxInstance, kill, make_instance
from tests.tess_site.children import Child, child_env, free_port, serves_healthz
from tests.waiting import wait_for

from .conftest import Live, Tess

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def alpha() -> Iterator[TmuxInstance]:
    if shutil.which("tmux") is None:
        require_or_skip("TMUX IS NOT INSTALLED")
    instance = make_instance("alpha")
    try:
        yield instance
    finally:
        kill(instance)


@pytest.fixture(scope="module")
def runtime_live(django_db_setup: None, start_child: Callable[..., Child], alpha: TmuxInstance) -> Live:
    from tests.tess_site.children import VENV_BIN

    port = free_port()
    child = start_child(
        "daphne",
        [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "tess_site.asgi:application"],
        child_env(TESS_RUNTIME_PROVIDERS=json.dumps({"alpha": alpha.config()})),
    )
    if not wait_for(lambda: not child.alive() or serves_healthz(port), timeout=30) or not child.alive():
        pytest.fail(child.output())
    return Live(port=port, child=child)


@pytest.fixture
def session(cast, settings, alpha):
    settings.TESS_RUNTIME_PROVIDERS = {"alpha": alpha.config()}
    reset_instances()
    try:
        yield services.session_start(scope=scope_of(cast.owner, cast.acme), instance="alpha", title="work")
    finally:
        reset_instances()


def test_tree_attach_send_and_detach(cast, runtime_live, session, tmp_path):
    tess = Tess(home=tmp_path / "config", url=runtime_live.url)
    tess.login("owner")
    tree = tess("sessions", "tree", str(session.pk))
    assert tree.returncode == 0, tree.stderr
    assert session.runtime_id in tree.stdout
    refused = tess("send", str(session.pk), "echo hi")
    assert refused.returncode == 5 and "attach" in refused.stderr.lower()
    attached = tess("attach", str(session.pk), "--interactive")
    assert attached.returncode == 0 and "Attached interactive" in attached.stdout
    sent = tess("send", str(session.pk), "echo hi")
    assert sent.returncode == 0, sent.stderr
    assert InboxItem.objects.get(session=session).text == "echo hi"
    assert "Detached 1" in tess("detach", str(session.pk)).stdout
    assert tess("send", str(session.pk), "again").returncode == 5
    assert InboxItem.objects.filter(session=session).count() == 1
