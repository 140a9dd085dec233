"""The sessions app's only contact with the channel layer: per-session groups and their wake-ups.

The database is the truth. A wake-up carries only the newest sequence number; consumers read the events
themselves, so a dropped wake-up (channels-redis drops over capacity, by design) costs latency, never data.
Every push happens after commit.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import uuid
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)

WAKE = "stream.wake"
RECHECK = "stream.recheck"
DELTA = "stream.delta"
MOVED = "stream.moved"

# The serving event loop, remembered by the first stream consumer. The in-process channel layer keeps
# asyncio queues bound to that loop; a push from another thread (the embedded pump) must run there.
_serving_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def session_group(session_id: uuid.UUID | str) -> str:
    return f"session.{uuid.UUID(str(session_id)).hex}"


def remember_serving_loop() -> None:
    """Called by consumers from the serving loop (see ``_send``)."""
    global _serving_loop
    with _loop_lock:
        _serving_loop = asyncio.get_running_loop()


_push_loop: asyncio.AbstractEventLoop | None = None


def _pushing_loop() -> asyncio.AbstractEventLoop:
    """A long-lived loop of this process for pushes from synchronous code.

    ``async_to_sync`` outside a server would run every push in a fresh event loop, and channels-redis
    keeps its connections per loop: each wake-up would open a connection. One loop keeps them warm.
    """
    global _push_loop
    with _loop_lock:
        if _push_loop is None or not _push_loop.is_running():  # not running: first use, or after a fork
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="tess-channel-push", daemon=True).start()
            _push_loop = loop
        return _push_loop


def _send(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        if isinstance(layer, InMemoryChannelLayer):
            _send_in_memory(layer, group, message)
        else:
            asyncio.run_coroutine_threadsafe(layer.group_send(group, message), _pushing_loop()).result(timeout=10)
    except Exception:  # a wake-up is best effort: consumers catch up from the database anyway
        logger.warning("could not wake group %s", group, exc_info=True)


def _send_in_memory(layer: InMemoryChannelLayer, group: str, message: dict[str, Any]) -> None:
    """The in-process layer's queues belong to the serving loop: pushes from other threads run there."""
    loop = _serving_loop
    if loop is None:
        # Only stream consumers join session groups, and each remembers its loop first: no loop means no
        # member in this process, so there is nobody to wake (and no event loop worth starting for it).
        return
    if loop.is_running():
        asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop)
    else:
        async_to_sync(layer.group_send)(group, message)


def wake_session_on_commit(session_id: uuid.UUID | str, seq: int) -> None:
    """After commit, tell the session's stream consumers that events up to ``seq`` exist."""
    group = session_group(session_id)
    transaction.on_commit(lambda: _send(group, {"type": WAKE, "seq": seq}))


def send_reply_delta(session_id: uuid.UUID | str, body: dict[str, Any]) -> None:
    """Now (nothing is committed: a delta is ephemeral, never stored), hand a piece of a reply being written
    to the session's stream consumers. Best effort: the durable ``turn.out`` carries the whole text."""
    _send(session_group(session_id), {"type": DELTA, "body": body})


def recheck_session_on_commit(session_id: uuid.UUID | str) -> None:
    """After commit, make every stream consumer of the session re-check its viewer's access now."""
    group = session_group(session_id)
    transaction.on_commit(lambda: _send(group, {"type": RECHECK}))


def binding_group(binding_id: int) -> str:
    """The stream sockets bound through one ingress binding (a browser session's or a CLI profile's)."""
    return f"binding.{int(binding_id)}"


def bindings_moved_on_commit(binding_ids: list[int]) -> None:
    """After commit, tell the stream sockets bound through these bindings that they were moved (a cutover or
    a rollback); each reads where to from the database."""
    for binding_id in binding_ids:
        transaction.on_commit(functools.partial(_send, binding_group(binding_id), {"type": MOVED}))


BOARD_CHANGED = "board.changed"


def board_group(tenant_id: int) -> str:
    """The fleet board sockets of one tenant; each reads the changed row through its own viewer's rule."""
    return f"board.{int(tenant_id)}"


def board_changed_on_commit(*, tenant_id: int, session_id: uuid.UUID | str) -> None:
    """After commit, tell the tenant's board sockets that a session's row changed (only its id travels)."""
    group = board_group(tenant_id)
    message = {"type": BOARD_CHANGED, "session_id": str(session_id)}
    transaction.on_commit(lambda: _send(group, message))
