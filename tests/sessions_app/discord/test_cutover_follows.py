"""A Discord channel bound to a session follows its cutover to another runtime, and its rollback."""

from __future__ import annotations

from typing import Any

import pytest

from providers_app.registry import reset_instances
from sessions_app import cutover, services
from sessions_app.models import Session, SessionEvent
from tests.conftest import scope_of
from tests.factories import SessionFactory

from .conftest import CHANNEL, command, link

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_instances(settings: Any, tmp_path: Any) -> Any:
    settings.TESS_RUNTIME_PROVIDERS = {
        "alpha": {"kind": "tmux", "socket": str(tmp_path / "a.sock")},
        "beta": {"kind": "tmux", "socket": str(tmp_path / "b.sock")},
    }
    reset_instances()
    yield
    reset_instances()


def turns(session: Session) -> list[str]:
    return [e.body["text"] for e in SessionEvent.objects.filter(session=session, kind="turn.in").order_by("seq")]


def test_a_turn_from_the_channel_lands_in_the_target_after_cutover_and_back_after_rollback(
    cast, two_instances, interact, discord_api, django_capture_on_commit_callbacks
):
    scope = scope_of(cast.owner, cast.acme)
    source, target = (
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="alpha"),
        SessionFactory.create(owner=cast.owner, tenant=cast.acme, provider_instance="beta"),
    )
    services.ingress_bind(scope=scope, session_id=source.pk, channel="discord", external_ref=CHANNEL)
    link(cast.owner, cast.acme, "101")

    def ask(text: str) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            assert interact(command("ask", "101", text=text)).json() == {"type": 5}

    ask("before")
    cutover.session_cutover(scope=scope, session_id=source.pk, target_id=target.pk)
    ask("after cutover")
    assert (turns(source), turns(target)) == (["before"], ["after cutover"])
    cutover.session_rollback(scope=scope, session_id=source.pk)
    ask("after rollback")
    assert (turns(source), turns(target)) == (["before", "after rollback"], ["after cutover"])
