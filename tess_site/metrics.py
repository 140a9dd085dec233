"""Prometheus metrics of the Tess processes: every metric object lives here.

Counters are incremented after the change they count has committed, so a rolled-back write is never
counted.

Two modes, chosen by prometheus_client when it is first imported:
- in-process (the default): each process keeps its own values; ``GET /metrics`` shows the serving process's.
  Right for the embedded default, where tasks run in the serving process.
- multiprocess, when ``PROMETHEUS_MULTIPROC_DIR`` names a directory writable by every Tess process (the
  deploy/ units set it): each process writes its values to files there, and a scrape of any ASGI process
  adds up all of them, the Celery workers' included. Gauges declare how processes combine
  (``multiprocess_mode``); values of processes that have exited are kept for counters and dropped for
  "live" gauges (open websockets).

Apps never import this module's internals to read values: they increment, and apps with state in the
database register a scrape-time collector (``register_scrape_collector``) that must be cheap and bounded.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import multiprocess as _multiprocess
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric

logger = logging.getLogger(__name__)

_MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
if _MULTIPROC_DIR and not (os.path.isdir(_MULTIPROC_DIR) and os.access(_MULTIPROC_DIR, os.W_OK | os.X_OK)):
    # Otherwise the first metric created below fails with a bare FileNotFoundError.
    raise RuntimeError(f"PROMETHEUS_MULTIPROC_DIR={_MULTIPROC_DIR!r} is not a directory this process can write")

# Latency buckets from a fast read to a slow model turn (seconds).
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# --- sessions ------------------------------------------------------------------------------------------------

SESSION_CUTOVERS = Counter(
    "tess_session_cutovers",
    "Ingress bindings moved between sessions on different runtime provider instances.",
    ["direction"],  # cutover | rollback
)

# --- HTTP (tess_site.metrics_http.RequestMetricsMiddleware) ---------------------------------------------------

HTTP_REQUESTS = Counter(
    "tess_http_requests",
    "HTTP requests answered, by method, route name and status class (2xx, 4xx, ...).",
    ["method", "route", "status"],
)
HTTP_REQUEST_DURATION = Histogram(
    "tess_http_request_duration_seconds",
    "Time from the request entering the middleware chain to its response leaving it.",
    ["method", "route"],
    buckets=_LATENCY_BUCKETS,
)

# --- websockets (tess_site.consumers.ScopedJsonConsumer, sessions_app.consumers) ------------------------------

WEBSOCKET_CONNECTS = Counter(
    "tess_websocket_connects", "Websockets accepted with a tenant scope, by consumer.", ["consumer"]
)
WEBSOCKET_DISCONNECTS = Counter(
    "tess_websocket_disconnects", "Accepted websockets that have closed, by consumer.", ["consumer"]
)
WEBSOCKET_OPEN = Gauge(
    "tess_websocket_open", "Websockets open now, by consumer.", ["consumer"], multiprocess_mode="livesum"
)
STREAM_LAG = Histogram(
    "tess_stream_lag_seconds",
    "Delivery time minus the event's ts for live session events sent to a stream websocket.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)

# --- Celery (signals, connected by tess_site.celery) -------------------------------------------------------------

CELERY_TASKS = Counter(
    "tess_celery_tasks",
    "Celery task runs by task name and state (started, succeeded, failed, retried, revoked).",
    ["task", "state"],
)
CELERY_TASK_DURATION = Histogram(
    "tess_celery_task_duration_seconds", "Run time of Celery tasks, by task name.", ["task"], buckets=_LATENCY_BUCKETS
)

# --- approvals (approvals_app registers the observer and the pending-count collector) ---------------------------

APPROVAL_TRANSITIONS = Counter(
    "tess_approval_transitions",
    "Approval requests entering a state: requested, approved, denied, executed, failed.",
    ["to"],
)

# --- the usage ledger (sessions_app.usage, after the rows commit) ------------------------------------------------

USAGE_TOKENS = Counter(
    "tess_usage_tokens",
    "Tokens recorded in the usage ledger, by tenant, provider (instance or model adapter), model and kind.",
    ["tenant", "provider", "model", "kind"],  # kind: input | output | cache_read | cache_write
)
USAGE_COST = Counter(
    "tess_usage_cost",
    "Cost recorded in the usage ledger (reported, priced or estimated), by tenant, provider, model and currency.",
    ["tenant", "provider", "model", "currency"],
)

# --- runtime providers (providers_app.health) --------------------------------------------------------------------

PROVIDER_HEARTBEAT = Gauge(
    "tess_provider_heartbeat_timestamp_seconds",
    "Unix time of the last successful health check (heartbeat) of each runtime provider instance.",
    ["instance", "kind"],
    multiprocess_mode="max",
)
PROVIDER_UP = Gauge(
    "tess_provider_up",
    "1 if the latest health check of the runtime provider instance succeeded, else 0.",
    ["instance", "kind"],
    multiprocess_mode="mostrecent",
)

SCRAPE_ERRORS = Counter(
    "tess_metrics_collector_errors", "Scrape-time collectors that failed (their metrics were left out).", ["collector"]
)


def record_provider_health(*, instance: str, kind: str, ok: bool, heartbeat_at: datetime | None) -> None:
    PROVIDER_UP.labels(instance=instance, kind=kind).set(1 if ok else 0)
    if ok and heartbeat_at is not None:
        PROVIDER_HEARTBEAT.labels(instance=instance, kind=kind).set(heartbeat_at.timestamp())


def observe_stream_lag(event_ts: datetime) -> None:
    # Clocks of different machines may disagree by a little; a negative lag means "no measurable lag".
    STREAM_LAG.observe(max(0.0, time.time() - event_ts.timestamp()))


# --- Celery task signals -------------------------------------------------------------------------------------------

_task_started: dict[str, float] = {}


def _task_name(sender: Any) -> str:
    return str(getattr(sender, "name", None) or sender or "unknown")


def _on_prerun(sender: Any = None, task_id: str | None = None, **kwargs: Any) -> None:
    CELERY_TASKS.labels(task=_task_name(sender), state="started").inc()
    if task_id is not None:
        _task_started[task_id] = time.perf_counter()


def _on_postrun(sender: Any = None, task_id: str | None = None, **kwargs: Any) -> None:
    started = _task_started.pop(task_id, None) if task_id is not None else None
    if started is not None:
        CELERY_TASK_DURATION.labels(task=_task_name(sender)).observe(time.perf_counter() - started)


def _state_counter(state: str) -> Callable[..., None]:
    def receiver(sender: Any = None, **kwargs: Any) -> None:
        CELERY_TASKS.labels(task=_task_name(sender), state=state).inc()

    return receiver


def _on_worker_process_shutdown(**kwargs: Any) -> None:
    """A pool process that exits drops its "live" gauge values at once (scrapes would also notice)."""
    path = multiprocess_dir()
    if path:
        _multiprocess.mark_process_dead(os.getpid(), path)


def connect_celery_signals() -> None:
    """Count every task run in whichever process runs it (worker, or the caller when eager)."""
    from celery import signals

    signals.task_prerun.connect(_on_prerun, weak=False, dispatch_uid="tess-metrics-prerun")
    signals.task_postrun.connect(_on_postrun, weak=False, dispatch_uid="tess-metrics-postrun")
    for signal, state in (
        (signals.task_success, "succeeded"),
        (signals.task_failure, "failed"),
        (signals.task_retry, "retried"),
        (signals.task_revoked, "revoked"),
    ):
        signal.connect(_state_counter(state), weak=False, dispatch_uid=f"tess-metrics-{state}")
    signals.worker_process_shutdown.connect(
        _on_worker_process_shutdown, weak=False, dispatch_uid="tess-metrics-process-shutdown"
    )


# --- scraping ------------------------------------------------------------------------------------------------------

ScrapeCollector = Callable[[], Iterable[Metric]]
_scrape_collectors: dict[str, ScrapeCollector] = {}


def register_scrape_collector(name: str, collect: ScrapeCollector) -> None:
    """Called from ``AppConfig.ready()``: ``collect()`` yields metric families read at scrape time.

    It runs in the scraping process on every scrape, so it must be cheap and bounded (a capped COUNT on an
    index, under a statement timeout). If it raises, its metrics are left out of that scrape and
    ``tess_metrics_collector_errors_total{collector=name}`` goes up; the scrape still succeeds.
    """
    _scrape_collectors[name] = collect


class _Registered:
    def collect(self) -> Iterable[Metric]:
        for name, collect in sorted(_scrape_collectors.items()):
            try:
                families = list(collect())
            except Exception:
                logger.warning("metrics collector %s failed", name, exc_info=True)
                SCRAPE_ERRORS.labels(collector=name).inc()
                continue
            yield from families


class _ThisProcess:
    """The default registry (this process's metrics), as a collector of another registry."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


_LIVE_FILE = re.compile(r"^gauge_live\w*_(\d+)\.db$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def forget_exited_processes(path: str) -> list[int]:
    """Drop the "live" gauge values of processes that no longer exist (a crashed or restarted server).

    Counters of exited processes stay: their counts happened. Returns the pids forgotten.
    """
    dead = set()
    for name in os.listdir(path):
        match = _LIVE_FILE.match(name)
        if match and not _alive(int(match.group(1))):
            dead.add(int(match.group(1)))
    for pid in sorted(dead):
        _multiprocess.mark_process_dead(pid, path)
    return sorted(dead)


def exposition() -> tuple[bytes, str]:
    """The Prometheus text exposition of every metric this deployment has, and its content type."""
    registry = CollectorRegistry(auto_describe=False)
    path = multiprocess_dir()
    if path:
        forget_exited_processes(path)
        _multiprocess.MultiProcessCollector(registry, path=path)
    else:
        registry.register(_ThisProcess())
    registry.register(_Registered())
    # The classic text format (0.0.4): every metric name here is plain, and every Prometheus version reads it.
    return generate_latest(registry), CONTENT_TYPE_PLAIN_0_0_4
