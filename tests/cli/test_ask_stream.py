"""``tess ask`` prints the reply as Tess writes it, and Ctrl-C stops it: a subprocess against daphne whose
model is the local chat-completions stand-in, streaming a word every 200 ms."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from typing import IO

import pytest

from sessions_app.models import SessionEvent, TurnRun
from tests.cli.conftest import Live
from tests.factories import SessionFactory
from tests.providers_app.chat_standin import ChatStandIn
from tests.sessions_app.answering import answering_daphne
from tests.tess_site.children import Child
from tests.waiting import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

DRIP = ChatStandIn(drip_seconds=0.2, think_seconds=1.0)  # bound now, so the server's environment can name it
TEXT = (
    "tell me how the whole fleet is doing on this fine and sunny morning, one session at a time, every agent"
    " and every task it has waiting, and what each of them has been doing since yesterday evening"
)
WHOLE = f"stand-in answer to: {TEXT}"


@pytest.fixture(scope="module")
def live(django_db_setup: None, start_child: Callable[..., Child]) -> Iterator[Live]:
    """daphne answering turns with the dripping stand-in as its model."""
    with answering_daphne(start_child, DRIP) as (port, child):
        yield Live(port=port, child=child)


class Reader:
    """A subprocess's output as it comes, a character at a time."""

    def __init__(self, stream: IO[str]) -> None:
        self.text = ""
        self._stream = stream
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            char = self._stream.read(1)
            if not char:
                return
            self.text += char

    def join(self) -> str:
        self._thread.join(timeout=30)
        return self.text


def test_ask_prints_the_reply_as_it_is_written(cast, tess):
    DRIP.finished.clear()
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    tess.login("owner")
    asking = tess.popen("ask", str(session.pk), TEXT)
    assert asking.stdout is not None
    out = Reader(asking.stdout)
    assert wait_for(lambda: "stand-in answer" in out.text, timeout=60)
    assert not DRIP.finished.is_set()  # printed while the model was still writing
    assert asking.wait(timeout=60) == 0, asking.stderr.read() if asking.stderr else ""
    assert out.join() == WHOLE + "\n"  # every piece once, in order, then the line's end
    assert SessionEvent.objects.get(session=session, kind="turn.out").body["text"] == WHOLE


def test_ctrl_c_stops_the_turn(cast, tess):
    DRIP.closed_event.clear()
    DRIP.finished.clear()
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    tess.login("owner")
    asking = tess.popen("ask", str(session.pk), TEXT)
    assert asking.stdout is not None
    out = Reader(asking.stdout)
    assert wait_for(lambda: "fleet" in out.text, timeout=60)
    asking.send_signal(signal.SIGINT)
    assert asking.wait(timeout=60) == 130
    stderr = asking.stderr.read() if asking.stderr else ""
    assert "stopped" in stderr, stderr
    assert DRIP.closed_event.wait(10)  # the model's connection was closed
    assert not DRIP.finished.is_set()
    written = SessionEvent.objects.get(session=session, kind="turn.out").body
    assert written["stopped"] is True
    assert written["text"].startswith("stand-in answer to: tell me how the whole fleet")
    assert len(written["text"]) < len(WHOLE)
    assert out.join() == written["text"] + "\n"  # what was printed is what the turn keeps
    assert not TurnRun.objects.filter(session=session).exists()
