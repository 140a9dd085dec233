"""Stop: ending a turn while the model answers it, from any node (DESIGN.md, "The copilot turn").

A turn thinks in the web thread of whichever node took its request (``gateway.turn_handle``, step 2); its Stop
may arrive at any other node or process. The stop has two halves:

- *durable*: ``TurnRun.stop_requested_at``, set in the database every node shares (the embedded SQLite too).
  The turn's process reads it when it starts watching (so a Stop that came before the watch is not missed)
  and again when it writes the turn (so a Stop whose wake-up was lost still ends as ``stopped``).
- *prompt*: a wake-up, published after the flag commits. Each process keeps the ``CancelEvent`` of every
  turn it is answering (``stop_watch``); a Stop in the same process sets it directly, and with Redis
  (``REDIS_URL``, every production topology) one pub/sub listener per process hears the Stops published by
  the others and sets the event of its own turns. The event is the model request's ``cancel``: the adapter
  closes its call to the model and returns the text so far.

Why not poll the row: a watcher per running turn asking PostgreSQL every fraction of a second would take a
connection each, which the turn gives back while it waits on the model (bench/b_fleet_model.py counts
them). Why not only Redis: the embedded default has none, and a pub/sub message published while nobody
listened is gone; the row is what makes the stop certain, the wake-up what makes it quick. Without Redis
the wake-up reaches only the process that took the Stop, which is the embedded default's only process.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from providers_app.http_cancel import CancelEvent
from tess_site.audit.services import record_audit
from tess_site.errors import Forbidden, NotFound
from tess_site.scope import Role, Scope

from . import selectors
from .models import TurnRun

logger = logging.getLogger(__name__)

# --- the turn's side: watching for a stop --------------------------------------------------------------

_watched: dict[str, CancelEvent] = {}
_watched_lock = threading.Lock()


@contextmanager
def stop_watch(turn_id: str, *, read: bool = True) -> Iterator[CancelEvent]:
    """While the ``with`` block runs, a Stop of ``turn_id`` sets the yielded event, wherever it arrives.

    Reads the row once on entry (a database query), after the process's listener is subscribed, so a Stop
    is either seen here or heard later. ``read=False`` skips that read, for a turn whose answer needs no wait
    (the deterministic adapter): a Stop that came before is honoured when the turn is written."""
    event = CancelEvent()
    with _watched_lock:
        _watched[turn_id] = event
    try:
        _listener_ready()
        if read and selectors.turn_stop_requested(turn_id=turn_id):
            event.set()
        yield event
    finally:
        with _watched_lock:
            _watched.pop(turn_id, None)


def _wake(turn_id: str) -> None:
    with _watched_lock:
        event = _watched.get(turn_id)
    if event is not None:
        event.set()


def _channel() -> str:
    return f"{settings.TESS_CHANNEL_PREFIX}:turn-stop"


_listener: tuple[int, threading.Event] | None = None  # (the process it runs in, subscribed)
_listener_lock = threading.Lock()
LISTENER_READY_SECONDS = 5.0


def _listener_ready() -> None:
    """Start this process's listener on first use (a forked worker starts its own) and wait until it is
    subscribed, at most ``LISTENER_READY_SECONDS``; a second turn arriving meanwhile does not wait. Until it
    listens, a Stop from another node is honoured when the turn is written rather than at once."""
    global _listener
    if not settings.REDIS_URL:
        return
    with _listener_lock:
        if _listener is not None and _listener[0] == os.getpid():
            return  # running (or reconnecting to a Redis that went away: then the turn's write honours a stop)
        subscribed = threading.Event()
        thread = threading.Thread(target=_listen, args=(str(settings.REDIS_URL), _channel(), subscribed))
        thread.daemon = True
        thread.name = "turn-stop-listener"
        thread.start()
        _listener = (os.getpid(), subscribed)
    subscribed.wait(LISTENER_READY_SECONDS)


def _listen(url: str, channel: str, subscribed: threading.Event) -> None:
    import redis

    while True:
        try:
            client = redis.Redis.from_url(url, socket_connect_timeout=5, health_check_interval=30)
            pubsub = client.pubsub()
            pubsub.subscribe(channel)
            for message in pubsub.listen():
                if message["type"] == "subscribe":
                    subscribed.set()  # the server has it: every Stop published from now on reaches us
                elif message["type"] == "message":
                    _wake(message["data"].decode())
        except Exception:
            subscribed.clear()
            logger.warning("the turn-stop listener lost Redis; retrying (stops are honoured when turns are written)")
            time.sleep(1)


# --- the Stop's side -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StopOutcome:
    """What a Stop did: ``stopping`` (this request stopped the turn), or a no-op saying why:
    ``already_stopping`` (an earlier Stop is ending it), ``already_stopped`` (it was written as stopped),
    ``already_finished`` (it was written whole before the Stop came)."""

    turn_id: str
    status: str

    MESSAGES = {
        "stopping": "The reply is being stopped; the turn is written as stopped with the text shown so far.",
        "already_stopping": "This turn is already being stopped; nothing more was done.",
        "already_stopped": "This turn was already stopped; nothing was done.",
        "already_finished": "This turn had already finished; nothing was stopped.",
    }

    def body(self) -> dict[str, Any]:
        return {"turn_id": self.turn_id, "status": self.status, "detail": self.MESSAGES[self.status]}


def turn_stop(*, scope: Scope, session_id: str, turn_id: str) -> StopOutcome:
    """Stop a running turn of a session the scope's actor may operate (404 if they cannot see it, 403 if
    they may only watch it); stopping twice, or after the turn was written, changes nothing and says so."""
    with transaction.atomic():
        session = selectors.access_session(scope=scope, session_id=session_id)
        if not scope.has_role(Role.OPERATOR) or not selectors.can_operate(scope=scope, session=session):
            raise Forbidden("Stopping a turn needs the operator role and the session's owner or an operate grant.")
        marked = TurnRun.objects.filter(pk=turn_id, session_id=session.pk, stop_requested_at__isnull=True).update(
            stop_requested_at=timezone.now()
        )
        if marked:
            record_audit(
                scope,
                action="turn.stopped",
                target_type="session",
                target_id=str(session.pk),
                outcome="stopping",
                metadata={"turn_id": turn_id},
            )
            transaction.on_commit(lambda: turn_stop_signal(turn_id))
            return StopOutcome(turn_id, "stopping")
        if TurnRun.objects.filter(pk=turn_id, session_id=session.pk).exists():
            return StopOutcome(turn_id, "already_stopping")
        out = selectors.turn_out_of(session_id=session.pk, turn_id=turn_id)
    if out is None:
        raise NotFound("No such turn in this session.")
    return StopOutcome(turn_id, "already_stopped" if out.get("stopped") else "already_finished")


def turn_stop_signal(turn_id: str) -> None:
    """Wake the turn's watcher: here directly, elsewhere through Redis (best effort: the row is the stop)."""
    _wake(turn_id)
    if not settings.REDIS_URL:
        return
    import redis

    try:
        client = redis.Redis.from_url(str(settings.REDIS_URL), socket_connect_timeout=5, socket_timeout=5)
        try:
            client.publish(_channel(), turn_id)
        finally:
            client.close()
    except redis.RedisError:
        logger.warning("turn %s: the stop's wake-up could not be published; it ends when it is written", turn_id)
