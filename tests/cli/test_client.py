"""The CLI's HTTP client: a retried turn carries the same Idempotency-Key; errors map to exit codes."""

from __future__ import annotations

import os
import stat

import httpx
import pytest

from tess_cli import config as config_store
from tess_cli.client import AUTH, NETWORK, NOT_FOUND, REFUSED, Api, CliError
from tess_cli.config import Config


def test_a_retry_after_a_network_error_reuses_the_idempotency_key():
    keys: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers["Idempotency-Key"])
        if len(keys) == 1:
            raise httpx.ConnectError("dropped", request=request)
        return httpx.Response(200, json={"reply": "ok"})

    api = Api(Config(url="http://tess.test", token="t"), transport=httpx.MockTransport(handler))
    response = api.request("POST", "/api/v1/sessions/x/turns/", json={"text": "hi"}, idempotent=True, retries=2)
    assert response.json() == {"reply": "ok"}
    assert len(keys) == 2 and keys[0] == keys[1] and len(keys[0]) == 32


def test_each_command_run_gets_a_new_idempotency_key():
    keys: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers["Idempotency-Key"])
        return httpx.Response(200, json={})

    api = Api(Config(url="http://tess.test", token="t"), transport=httpx.MockTransport(handler))
    api.post("/a/")
    api.post("/a/")
    assert keys[0] != keys[1]


@pytest.mark.parametrize(
    "status,code", [(401, AUTH), (404, NOT_FOUND), (403, NOT_FOUND), (422, REFUSED), (429, REFUSED)]
)
def test_error_statuses_map_to_documented_exit_codes(status, code):
    envelope = {"error": {"code": "x", "message": "Nope.", "correlation_id": "c", "details": {}}}
    api = Api(
        Config(url="http://t", token="t"),
        transport=httpx.MockTransport(lambda r: httpx.Response(status, json=envelope)),
    )
    with pytest.raises(CliError) as raised:
        api.get("/api/v1/me/")
    assert raised.value.code == code
    assert raised.value.message.startswith("Nope. (x, HTTP")


def test_network_errors_give_up_after_the_retries():
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    api = Api(Config(url="http://t", token="t"), transport=httpx.MockTransport(handler))
    with pytest.raises(CliError) as raised:
        api.get("/api/v1/me/")
    assert raised.value.code == NETWORK


def test_the_config_is_written_owner_only_under_xdg_config_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("TESS_URL", raising=False)
    monkeypatch.delenv("TESS_TOKEN", raising=False)
    path = config_store.save(Config(url="https://tess.example", token="secret"))
    assert path == tmp_path / "tess" / "config.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert config_store.load().token == "secret"
    monkeypatch.setenv("TESS_TOKEN", "override")
    assert config_store.load().token == "override"
