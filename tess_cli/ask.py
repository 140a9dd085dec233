"""``tess ask``: the reply printed as Tess writes it, and Ctrl-C to stop it.

While the turn's request waits for its answer, the session's websocket is open beside it: a turn being
answered announces itself there with an empty ``turn.delta`` (its ``turn_id``), then sends its reply in
pieces, each with the offset it starts at. The pieces are printed as they come; the request's answer (the
whole reply) completes whatever the socket missed. Ctrl-C sends the turn's Stop
(``POST /api/v1/sessions/{id}/turns/{turn}/stop/``) and prints the turn as it was written, stopped.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from websockets.sync.client import ClientConnection, connect

from .config import Config
from .stream import ws_url

CONNECT_SECONDS = 10.0  # the most the turn waits for the socket: without it the reply is printed whole at the end


class ReplyWatch:
    """The session's websocket while one turn runs: its ``turn_id`` once announced, its pieces as they come,
    and its ``turn.out``."""

    def __init__(self, config: Config, session_id: str, cursor: int, *, show: bool = True) -> None:
        self.show = show  # print the pieces (not with --json)
        self.url = ws_url(config, session_id, cursor)
        self.headers = {"Authorization": f"Bearer {config.token}"}
        self.connected = threading.Event()
        self.announced = threading.Event()
        self.ended = threading.Event()
        self.turn_id: str | None = None
        self.printed = ""  # the reply as far as it has been printed
        self.out: dict[str, Any] = {}
        self._armed = False
        self._before: set[str] = set()  # turns already running when this one was sent: not ours
        self._lock = threading.Lock()
        self._ws: ClientConnection | None = None
        self._thread = threading.Thread(target=self._run, name="tess-ask-watch", daemon=True)

    def start(self) -> ReplyWatch:
        self._thread.start()
        self.connected.wait(CONNECT_SECONDS)
        return self

    def arm(self) -> None:
        """The turn is about to be sent: the next turn announced is taken for it."""
        with self._lock:
            self._armed = True

    def close(self) -> None:
        ws = self._ws
        if ws is not None:
            ws.close()

    def _run(self) -> None:
        try:
            with connect(self.url, additional_headers=self.headers, open_timeout=CONNECT_SECONDS, proxy=None) as ws:
                self._ws = ws
                self.connected.set()
                for raw in ws:
                    if self._frame(json.loads(raw)):
                        return
        except Exception:
            return
        finally:
            self.connected.set()

    def _frame(self, frame: dict[str, Any]) -> bool:
        body = frame.get("body") or {}
        turn_id = str(body.get("turn_id") or "")
        if frame.get("kind") == "turn.delta" and turn_id:
            with self._lock:
                if self.turn_id is None:
                    if not self._armed or turn_id in self._before:
                        self._before.add(turn_id)
                        return False
                    self.turn_id = turn_id
                    self.announced.set()
            if turn_id == self.turn_id:
                self._piece(int(body.get("offset") or 0), str(body.get("text") or ""))
        elif frame.get("kind") == "turn.out" and turn_id and turn_id == self.turn_id:
            self.out = body
            self.ended.set()
            return True
        return False

    def _piece(self, offset: int, text: str) -> None:
        with self._lock:
            have = len(self.printed)
            if offset > have or offset + len(text) <= have:
                return  # a gap (the answer completes it) or nothing new
            new = text[have - offset :]
            self.printed += new
        if not self.show:
            return
        sys.stdout.write(new)
        sys.stdout.flush()

    def finish(self, reply: str) -> None:
        """Print what the pieces did not, once the whole reply is known; then end the line."""
        with self._lock:
            printed, self.printed = self.printed, reply
        if printed and reply.startswith(printed):
            sys.stdout.write(reply[len(printed) :] + "\n")
        elif printed:  # the answer is not the text that grew (a fallback answer): show it whole
            sys.stdout.write("\n" + reply + "\n")
        else:
            sys.stdout.write(reply + "\n")
        sys.stdout.flush()
