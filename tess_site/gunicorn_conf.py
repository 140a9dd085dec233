"""gunicorn's configuration for Tess's HTTP server (``deploy/systemd/tess-web.service``).

``gunicorn -c python:tess_site.gunicorn_conf --bind ADDRESS:PORT tess_site.wsgi:application``: threaded
workers (gthread) serve the synchronous Django and DRF stack; websockets go to daphne (``tess-ws.service``).

Two of gunicorn's defaults are changed for the hardening rules:

- the access log goes through Tess's logging (the ``tess.access`` logger), so its lines are masked and
  formatted like every other line: a one-time approval link or a token put in a URL never reaches the journal;
- gunicorn believes no forwarded header: by default it lets a peer on loopback (and any peer of a Unix socket)
  set the scheme with ``X-Forwarded-Proto``, so any local process could claim HTTPS. Only Tess's
  ``ClientAddressMiddleware`` reads forwarded headers, and only from ``TESS_TRUSTED_PROXIES``.
"""

from __future__ import annotations

import logging
from typing import Any

from gunicorn.glogging import Logger

from tess_site.settings.env import env_int

# Worker processes, each with its own threads and its own connection pool (TESS_DB_POOL_MAX per process).
workers = env_int("TESS_WEB_WORKERS", 2, minimum=1, maximum=64)
worker_class = "gthread"
# A turn holds its thread while it waits on the model (seconds), but no database connection: the threads must
# outnumber the turns that may wait at once, or every other request queues behind them. A worker can be handed
# all of them (workers take connections as they come, not in turn), so each worker has room for 32 waiting
# turns and the usual 8-16 short requests; the pool (TESS_DB_POOL_MAX) still bounds the database's share.
# bench/b_fleet_model.py measures it: with 8 threads, 32 turns on a 2 s model made /healthz wait seconds.
threads = env_int("TESS_WEB_THREADS", 48, minimum=1, maximum=256)
# A turn waits on the model (TESS_MODEL_TIMEOUT_SECONDS, at most 600); the worker must outlive it.
timeout = env_int("TESS_WEB_TIMEOUT_SECONDS", 660, minimum=30, maximum=3600)
graceful_timeout = 30
keepalive = 5  # longer than nginx's upstream keepalive_timeout (deploy/nginx/tess.conf), which closes first
# As long a request line as nginx passes on (large_client_header_buffers, 8k by default): a search query that
# reached Tess through the proxy is answered by Tess, not refused by gunicorn's 4 KB default.
limit_request_line = 8190

# No header sets the scheme or the script name; an empty allow-list as well, so a later default cannot either.
secure_scheme_headers: dict[str, str] = {}
forwarder_headers = ""
forwarded_allow_ips = ""

# gunicorn's control socket (gunicornc) would be one more way into the server, in the service's home.
control_socket_disable = True

accesslog = "-"  # on; the lines themselves go to tess.access (TessLogger below)
access_log_format = '%(h)s - - %(t)s "%(r)s" %(s)s %(b)s %(M)sms'


class TessLogger(Logger):
    """gunicorn's logger with the access log written as ``tess.access`` records and its own lines masked."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        from tess_site.logging import RedactingFormatter

        # gunicorn's own lines (start, stop, worker errors) can quote a request's URI: masked as well.
        for handler in self.error_log.handlers:
            handler.setFormatter(RedactingFormatter(self.error_fmt, self.datefmt))
        self.access_log = logging.getLogger("tess.access")


logger_class = TessLogger
