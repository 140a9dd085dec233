"""daphne, with its access log written through Tess's logging.

daphne writes access-log lines straight to a stream, past every logging filter, so a one-time approval link
or a token someone put in a URL would reach the journal whole. Here each line becomes a record of the
``tess.access`` logger and is masked and formatted like every other line.

Usage, as in ``deploy/systemd/tess-ws.service``: ``python -m tess_site.asgi_server [daphne options] APP``.
"""

from __future__ import annotations

import sys
from typing import Any

from daphne.access import AccessLogGenerator
from daphne.cli import CommandLineInterface
from daphne.server import Server

from .logging import access_logger


class _AccessLogStream:
    """A write-only stream whose lines become ``tess.access`` records."""

    def write(self, text: str) -> int:
        line = text.rstrip("\n")
        if line:
            access_logger().info(line)
        return len(text)

    def flush(self) -> None:
        return None


class LoggedServer(Server):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("action_logger") is not None:  # daphne turns the access log off at --verbosity 0
            kwargs["action_logger"] = AccessLogGenerator(_AccessLogStream())
        super().__init__(*args, **kwargs)


class TessDaphne(CommandLineInterface):
    server_class = LoggedServer


def main(argv: list[str] | None = None) -> None:
    TessDaphne().run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
