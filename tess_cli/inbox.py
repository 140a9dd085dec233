"""``tess inbox --watch``: the inbox kept live from ``/ws/me/`` — its snapshot on every (re)connect, then the
``inbox.item`` and ``inbox.left`` pushes. Nothing is polled."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import connect

from .client import AUTH, NETWORK, NOT_FOUND, CliError
from .config import Config

FATAL_CLOSES = {4401: AUTH, 4403: NOT_FOUND}


def me_url(config: Config) -> str:
    parts = urlsplit(config.url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    return f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}/ws/me/"


def apply(items: dict[str, dict[str, Any]], frame: dict[str, Any]) -> bool:
    """Change ``items`` (by key) by one ``/ws/me/`` frame; True if the inbox changed."""
    kind, body = frame.get("kind"), frame.get("body") or {}
    if kind == "snapshot":
        items.clear()
        items.update({item["key"]: item for item in body.get("inbox", [])})
        return True
    if kind == "inbox.item":
        item = {k: v for k, v in body.items() if k != "notify"}
        changed = items.get(item["key"]) != item
        items[item["key"]] = item
        return changed
    if kind == "inbox.left":
        return items.pop(str(body.get("key")), None) is not None
    return False


def watch(
    config: Config,
    *,
    on_change: Callable[[list[dict[str, Any]]], None],
    max_updates: int = 0,
    max_wait: float = 30.0,
) -> None:
    """Call ``on_change(items)`` with the whole inbox whenever it changes, until interrupted (or ``max_updates``)."""
    items: dict[str, dict[str, Any]] = {}
    updates = 0
    delay = 0.25
    down_since: float | None = None
    headers = {"Authorization": f"Bearer {config.token}"}
    while True:
        try:
            with connect(me_url(config), additional_headers=headers, open_timeout=10, proxy=None) as ws:
                down_since, delay = None, 0.25
                for raw in ws:
                    if apply(items, json.loads(raw)):
                        on_change(list(items.values()))
                        updates += 1
                        if max_updates and updates >= max_updates:
                            return
                if ws.close_code in FATAL_CLOSES:
                    raise CliError(
                        f"The server closed the inbox (close code {ws.close_code}).", FATAL_CLOSES[ws.close_code]
                    )
        except InvalidStatus as exc:
            status = exc.response.status_code
            raise CliError(f"The server refused the inbox socket (HTTP {status}); check `tess login`.", AUTH) from exc
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            if code in FATAL_CLOSES:
                raise CliError(f"The server closed the inbox (close code {code}).", FATAL_CLOSES[code]) from exc
        except (OSError, InvalidHandshake, TimeoutError):
            pass
        now = time.monotonic()
        down_since = down_since or now
        if now - down_since > max_wait:
            raise CliError(f"Lost the inbox socket and could not reconnect for {max_wait:.0f}s.", NETWORK)
        print("[reconnecting…]", file=sys.stderr, flush=True)
        time.sleep(delay)
        delay = min(delay * 2, 5.0)
