"""Health: liveness for anyone, an authenticated report of every dependency, and never a credential."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client, override_settings
from rest_framework.test import APIClient

from tess_site.celery import app
from tess_site.health import CHECK_TIMEOUT_SECONDS

from .children import free_port

HEALTH = "/api/v1/health/"

SECRET_KEY = "django-SECRETKEY-b6f1c0e2d4a8-never-print-me"
MODEL_API_KEY = "sk-test-SUPERSECRET123"
MODEL_BASE_PASSWORD = "modelBASEpassWORD77"
DB_PASSWORD = "dbPASSWORD-9f8e7d6c"
REDIS_PASSWORD = "redisPASSWORD-0a1b2c3d"


def _redis_url_with_password(password: str, *, reachable: bool) -> str:
    """A Redis URL with a made-up password: the real server (whose default user, without a password of its
    own, accepts any), or a closed port, so the report both succeeds and fails with the password in play."""
    assert settings.REDIS_URL
    if not reachable:
        return f"redis://:{password}@127.0.0.1:{free_port()}/0"
    scheme, rest = settings.REDIS_URL.split("://", 1)
    return f"{scheme}://:{password}@{rest.rsplit('@', 1)[-1]}"


def _redis_layers(url: str) -> dict[str, Any]:
    return {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [url], "prefix": "tess-t"}}
    }


@pytest.fixture
def silent_redis_url() -> Iterator[str]:
    """A port that accepts connections and never answers, like a wedged Redis or a half-open route."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)  # the kernel completes handshakes; nobody ever reads or writes
        yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"


@pytest.fixture
def celery_uses_a_broker() -> Iterator[Callable[[str], None]]:
    """Make this process talk to a broker (the test settings run tasks in-process); undone afterwards."""
    eager, broker = app.conf.task_always_eager, app.conf.broker_url

    def use(url: str) -> None:
        app.conf.update(task_always_eager=False, broker_url=url)

    try:
        yield use
    finally:
        app.conf.update(task_always_eager=eager, broker_url=broker)


def test_healthz_answers_without_authentication():
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_it_refuses_the_health_report_without_a_credential():
    response = APIClient().get(HEALTH)
    assert response.status_code == 401
    assert "checks" not in response.json()


@pytest.mark.django_db
def test_it_refuses_the_health_report_to_a_signed_in_user_who_is_no_member(cast, browser_as):
    cast.owner.tess_memberships.all().delete()
    assert browser_as(cast.owner).get(HEALTH).status_code == 403


@pytest.mark.postgres
@pytest.mark.redis
def test_it_reports_every_dependency_ok_on_real_postgres_and_redis(cast, api_as):
    response = api_as(cast.owner).get(HEALTH)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok"
    checks = body["checks"]
    assert set(checks) == {"database", "redis", "channel_layer", "celery", "runtime_providers"}
    assert all(check["ok"] for check in checks.values())
    assert checks["database"]["vendor"] == "postgresql"
    assert checks["redis"]["mode"] == "redis"
    assert checks["channel_layer"]["backend"] == "WaitingRedisChannelLayer"
    # The test settings run tasks in-process; test_celery_worker covers real workers.
    assert checks["celery"]["mode"] == "in-process"


@pytest.mark.django_db
def test_a_browser_session_gets_the_report_too(cast, browser_as):
    assert browser_as(cast.auditor).get(HEALTH).status_code == 200


@override_settings(
    TESS_MODEL_ADAPTER="openai",
    TESS_MODEL="gpt-test-large",
    TESS_REASONING_LEVEL="high",
    TESS_TOOL_POLICY="read_only",
    TESS_MODEL_API_KEY=MODEL_API_KEY,
)
@pytest.mark.django_db
def test_it_reports_the_effective_model_reasoning_level_and_tool_policy(cast, api_as):
    body = api_as(cast.owner).get(HEALTH).json()
    assert body["model"] == {
        "adapter": "openai",
        "model": "gpt-test-large",
        "model_configured": True,
        "notice": "",
        "reasoning_level": "high",
        "tool_policy": "read_only",
        "tool_policy_enforced": {"allows": ["tess"], "refuses": ["human_approval", "mos"]},
        "credentials_configured": True,
    }


@pytest.mark.django_db
def test_the_default_tool_policy_lets_approvals_and_mos_through(cast, api_as):
    body = api_as(cast.owner).get(HEALTH).json()
    assert body["model"]["tool_policy"] == "approval_required"
    assert body["model"]["tool_policy_enforced"] == {"allows": ["tess", "human_approval", "mos"], "refuses": []}


@override_settings(TESS_MODEL_ADAPTER="deterministic", TESS_MODEL="tess-deterministic", TESS_MODEL_API_KEY=None)
@pytest.mark.django_db
def test_without_a_model_it_says_plainly_that_none_is_configured(cast, api_as):
    """seed 001: running on the deterministic adapter is an explicit choice, and health never passes it off as
    a model."""
    body = api_as(cast.owner).get(HEALTH).json()
    assert body["model"]["adapter"] == "deterministic"
    assert body["model"]["model"] is None and body["model"]["model_configured"] is False
    assert body["model"]["notice"].startswith("No model is configured")


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.parametrize("redis_reachable", [True, False], ids=["redis-up", "redis-down"])
def test_it_never_shows_a_credential(cast, api_as, monkeypatch, celery_uses_a_broker, redis_reachable):
    redis_url = _redis_url_with_password(REDIS_PASSWORD, reachable=redis_reachable)
    celery_uses_a_broker(redis_url)
    monkeypatch.setitem(connection.settings_dict, "PASSWORD", DB_PASSWORD)  # trust auth: the open connection lives
    client = api_as(cast.owner)
    with override_settings(
        SECRET_KEY=SECRET_KEY,
        TESS_MODEL_ADAPTER="openai",
        TESS_MODEL="gpt-test-large",
        TESS_MODEL_BASE_URL=f"https://tess:{MODEL_BASE_PASSWORD}@models.example/v1",
        TESS_MODEL_API_KEY=MODEL_API_KEY,
        REDIS_URL=redis_url,
        CHANNEL_LAYERS=_redis_layers(redis_url),
    ):
        response = client.get(HEALTH)
    body = response.json()
    assert body["model"]["credentials_configured"] is True
    if not redis_reachable:
        assert response.status_code == 503
        assert body["checks"]["redis"]["ok"] is False
        assert body["checks"]["channel_layer"]["ok"] is False
        assert body["checks"]["celery"]["ok"] is False
    everything = response.content.decode() + "\n" + "\n".join(f"{k}: {v}" for k, v in response.headers.items())
    for secret in (SECRET_KEY, MODEL_API_KEY, MODEL_BASE_PASSWORD, DB_PASSWORD, REDIS_PASSWORD):
        assert secret not in everything
    assert "models.example" not in everything  # not even the endpoint's address
    assert "redis://" not in everything


@pytest.mark.django_db
def test_a_dependency_that_is_down_makes_the_report_degraded_with_503(cast, api_as):
    with override_settings(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"):
        response = api_as(cast.owner).get(HEALTH)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "degraded"
    assert body["checks"]["redis"] == {"ok": False, "error": "ConnectionError", "ms": body["checks"]["redis"]["ms"]}
    assert body["checks"]["database"]["ok"] is True


@pytest.mark.django_db(transaction=True)  # the request runs in another thread, with its own connection
def test_a_dependency_that_never_answers_cannot_hang_the_report(
    cast, api_as, silent_redis_url, celery_uses_a_broker
) -> None:
    client = api_as(cast.owner)
    responses: list[Any] = []

    def ask() -> None:
        try:
            responses.append(client.get(HEALTH))
        finally:
            connection.close()  # this thread's own; an open one would keep the test database from being dropped

    celery_uses_a_broker(silent_redis_url)
    with override_settings(REDIS_URL=silent_redis_url, CHANNEL_LAYERS=_redis_layers(silent_redis_url)):
        probe = threading.Thread(target=ask, daemon=True)
        started = time.monotonic()
        probe.start()
        probe.join(timeout=60)  # a hung report fails this test instead of hanging the suite
        elapsed = time.monotonic() - started
    assert not probe.is_alive(), "the health report hung on a dependency that never answers"
    # Three network checks, each bounded by CHECK_TIMEOUT_SECONDS, plus slack for a loaded machine.
    assert elapsed < 3 * CHECK_TIMEOUT_SECONDS + 5
    [response] = responses
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert {name: check["ok"] for name, check in checks.items()} == {
        "database": True,
        "redis": False,
        "channel_layer": False,
        "celery": False,
        "runtime_providers": True,  # no instances configured: nothing is down
    }
