"""``tess stream``: the session's events over the websocket, resuming from the last seen seq after a drop."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import connect

from .client import AUTH, NOT_FOUND, REFUSED, CliError
from .config import Config

FATAL_CLOSES = {4400: REFUSED, 4401: AUTH, 4403: NOT_FOUND, 4404: NOT_FOUND}


def ws_url(config: Config, session_id: str, cursor: int) -> str:
    parts = urlsplit(config.url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    prefix = parts.path.rstrip("/")
    return f"{scheme}://{parts.netloc}{prefix}/ws/sessions/{session_id}/stream/?cursor={cursor}"


def follow(
    config: Config,
    session_id: str,
    *,
    cursor: int,
    on_event: Callable[[dict[str, Any]], bool | None],
    on_moved: Callable[[dict[str, Any]], bool] | None = None,
    max_events: int = 0,
    max_wait: float = 30.0,
) -> int:
    """Print events after ``cursor`` until interrupted, ``max_events``, or ``on_event`` answers True; returns
    the last seq seen.

    A drop (server restart, network) reconnects with backoff from the last seq, so nothing is lost or
    repeated; refusals (bad token, not yours) end the command. Gives up after ``max_wait`` seconds of
    failed reconnects. A ``binding.moved`` frame (a cutover moved this profile to another session) goes to
    ``on_moved``; if it answers True, the stream goes on in the new session, from the frame's ``cursor``.
    """
    seen = 0
    delay = 0.25
    down_since: float | None = None
    headers = {"Authorization": f"Bearer {config.token}"}
    while True:
        try:
            with connect(
                ws_url(config, session_id, cursor), additional_headers=headers, open_timeout=10, proxy=None
            ) as ws:
                down_since, delay = None, 0.25
                moved: dict[str, Any] | None = None
                for raw in ws:
                    frame = json.loads(raw)
                    if frame.get("kind") == "binding.moved" and on_moved is not None:
                        body = frame.get("body") or {}
                        if body.get("to") and body.get("to") != session_id and on_moved(body):
                            moved = body
                            break
                        continue
                    if frame.get("kind") == "heartbeat" or frame.get("seq") is None:
                        continue
                    if int(frame["seq"]) <= cursor:
                        continue
                    cursor = int(frame["seq"])
                    stop = on_event(frame)
                    seen += 1
                    if stop or (max_events and seen >= max_events):
                        return cursor
                if moved is not None:
                    session_id, cursor = str(moved["to"]), int(moved.get("cursor") or 0)
                    continue
                # The server closed the socket: a refusal ends; anything else reconnects.
                _raise_if_fatal(ws.close_code)
        except InvalidStatus as exc:
            status = exc.response.status_code
            raise CliError(
                f"The server refused the stream (HTTP {status}); check `tess login`.",
                AUTH if status in (401, 403) else NOT_FOUND,
            ) from exc
        except ConnectionClosed as exc:
            _raise_if_fatal(exc.rcvd.code if exc.rcvd else None)
        except (OSError, InvalidHandshake, TimeoutError):
            pass
        now = time.monotonic()
        down_since = down_since or now
        if now - down_since > max_wait:
            raise CliError(f"Lost the stream and could not reconnect for {max_wait:.0f}s (at seq {cursor}).", 6)
        print(f"[reconnecting from seq {cursor}…]", file=sys.stderr, flush=True)
        time.sleep(delay)
        delay = min(delay * 2, 5.0)


def _raise_if_fatal(code: int | None) -> None:
    if code in FATAL_CLOSES:
        raise CliError(f"The server ended the stream (close code {code}).", FATAL_CLOSES[code])
