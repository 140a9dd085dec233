"""Production settings: start-up refuses what is missing, naming all of it, and a complete environment
passes ``manage.py check --deploy`` with no issues.

Each case runs a fresh Python process with a controlled environment (settings are read once per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Everything production needs, none of it a real credential.
COMPLETE = {
    "SECRET_KEY": "prod-test-" + "".join(chr(ord("a") + i % 26) + str(i % 10) for i in range(30)),
    "DATABASE_URL": "postgres://tess:pw@127.0.0.1:5432/tess",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "ALLOWED_HOSTS": "tess.example",
    "TESS_PUBLIC_URL": "https://tess.example",
    "TESS_MODEL_ADAPTER": "deterministic",
    "TESS_INSTANCE_ID": "tess-eu-1",
    "TESS_GATEWAY_SIGNING_KEY": "gateway-signing-key-0123456789abcdefghij",
}
DISCORD = {
    "TESS_DISCORD_PUBLIC_KEY": "ab" * 32,
    "TESS_DISCORD_APPLICATION_ID": "123456789012345678",
    "TESS_DISCORD_BOT_TOKEN": "bot-token-for-tests",
}
OPENAI = {
    "TESS_MODEL_ADAPTER": "openai_compatible",
    "TESS_MODEL_BASE_URL": "http://127.0.0.1:9/v1",
    "TESS_MODEL_API_KEY": "model-key-for-tests",
}


def _env(env: dict[str, str], settings_module: str = "tess_site.settings.prod") -> dict[str, str]:
    """The test's environment without anything Tess reads (so the machine's own variables cannot leak in)."""
    own = ("TESS_", "DJANGO_", "SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS", "DEBUG", "PROMETHEUS_")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(own)}
    return {**clean, **env, "DJANGO_SETTINGS_MODULE": settings_module}


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=_env(env), capture_output=True, text=True, timeout=120, check=False
    )


def _start(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Load the production settings module, as every process (daphne, worker, beat, manage.py) does first."""
    return _run(["-c", "import tess_site.settings.prod"], env)


def _refusal(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout
    lines = [line for line in result.stderr.splitlines() if "refuses to start in production without" in line]
    assert lines, result.stderr[-2000:]
    return lines[-1]


def _without(*names: str, **extra: str) -> dict[str, str]:
    return {**{k: v for k, v in COMPLETE.items() if k not in names}, **extra}


def _settings(env: dict[str, str], *names: str) -> dict[str, Any]:
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        f"print(json.dumps({{n: getattr(s, n) for n in {list(names)!r}}}, default=str))"
    )
    result = _run(["-c", code], env)
    assert result.returncode == 0, result.stderr[-2000:]
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def test_with_nothing_set_it_names_every_missing_item_at_once():
    refusal = _refusal(_start({}))
    for name in (
        "SECRET_KEY",
        "ALLOWED_HOSTS",
        "DATABASE_URL",
        "REDIS_URL",
        "TESS_PUBLIC_URL",
        "TESS_MODEL_ADAPTER",
        "TESS_INSTANCE_ID",
        "TESS_GATEWAY_SIGNING_KEY",
    ):
        assert name in refusal, name


@pytest.mark.parametrize("name", sorted(COMPLETE))
def test_it_names_each_missing_item_alone(name):
    refusal = _refusal(_start(_without(name)))
    assert name in refusal
    others = [other for other in COMPLETE if other != name and other + " " in refusal]
    assert others == []


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("SECRET_KEY", "short-key"),
        ("SECRET_KEY", "k" * 60),  # long, but five different characters are the least Django accepts
        ("DATABASE_URL", "sqlite:///var/tess.sqlite3"),
        ("REDIS_URL", "memory://"),
        ("ALLOWED_HOSTS", "*"),
        ("TESS_PUBLIC_URL", "http://tess.example"),
        ("TESS_GATEWAY_SIGNING_KEY", "too-short"),
    ],
)
def test_it_refuses_a_value_that_would_be_unsafe_or_wrong(name, bad):
    assert name in _refusal(_start({**COMPLETE, name: bad}))


def test_it_refuses_debug():
    assert "DEBUG" in _refusal(_start({**COMPLETE, "DEBUG": "1"}))


def test_the_deterministic_adapter_needs_choosing_explicitly():
    assert "TESS_MODEL_ADAPTER" in _refusal(_start(_without("TESS_MODEL_ADAPTER")))
    assert _start(COMPLETE).returncode == 0


@pytest.mark.parametrize("name", ["TESS_MODEL_BASE_URL", "TESS_MODEL_API_KEY"])
def test_the_openai_compatible_adapter_needs_its_base_url_and_key(name):
    env = {**COMPLETE, **{k: v for k, v in OPENAI.items() if k != name}}
    assert name in _refusal(_start(env))


def test_the_openai_compatible_adapter_starts_with_everything():
    result = _start({**COMPLETE, **OPENAI})
    assert result.returncode == 0, result.stderr[-2000:]


def test_discord_turned_on_without_its_keys_is_refused_naming_each():
    refusal = _refusal(_start({**COMPLETE, "TESS_DISCORD_ENABLED": "1"}))
    for name in DISCORD:
        assert name in refusal, name


def test_a_discord_key_alone_turns_discord_on_and_the_rest_is_asked_for():
    refusal = _refusal(_start({**COMPLETE, "TESS_DISCORD_BOT_TOKEN": "bot-token-for-tests"}))
    assert "TESS_DISCORD_PUBLIC_KEY" in refusal and "TESS_DISCORD_APPLICATION_ID" in refusal
    assert "TESS_DISCORD_BOT_TOKEN" not in refusal


def test_discord_with_its_keys_starts_and_turned_off_it_refuses_every_interaction():
    assert _start({**COMPLETE, **DISCORD}).returncode == 0
    on = _settings({**COMPLETE, **DISCORD}, "TESS_DISCORD_ENABLED", "TESS_DISCORD_PUBLIC_KEY")
    assert on == {"TESS_DISCORD_ENABLED": True, "TESS_DISCORD_PUBLIC_KEY": "ab" * 32}
    off = _settings({**COMPLETE, **DISCORD, "TESS_DISCORD_ENABLED": "0"}, "TESS_DISCORD_PUBLIC_KEY")
    assert off == {"TESS_DISCORD_PUBLIC_KEY": ""}  # no key: the interactions endpoint verifies nothing


def test_the_webhook_mos_adapter_needs_its_url_and_signs_with_the_gateway_key_by_default():
    assert "TESS_MOS_WEBHOOK_URL" in _refusal(_start({**COMPLETE, "TESS_MOS_ADAPTER": "webhook"}))
    env = {**COMPLETE, "TESS_MOS_ADAPTER": "webhook", "TESS_MOS_WEBHOOK_URL": "https://mos.example/hook"}
    assert _settings(env, "TESS_MOS_WEBHOOK_SECRET") == {
        "TESS_MOS_WEBHOOK_SECRET": COMPLETE["TESS_GATEWAY_SIGNING_KEY"]
    }
    own = _settings({**env, "TESS_MOS_WEBHOOK_SECRET": "mos-own-secret"}, "TESS_MOS_WEBHOOK_SECRET")
    assert own == {"TESS_MOS_WEBHOOK_SECRET": "mos-own-secret"}


def test_a_malformed_instance_id_is_refused():
    result = _start({**COMPLETE, "TESS_INSTANCE_ID": "tess eu/1"})
    assert result.returncode != 0 and "TESS_INSTANCE_ID" in result.stderr


def test_every_secret_can_come_from_a_file_and_none_is_printed_when_one_cannot_be_read(tmp_path):
    secrets = {
        "SECRET_KEY": COMPLETE["SECRET_KEY"],
        "DATABASE_URL": COMPLETE["DATABASE_URL"],
        "REDIS_URL": COMPLETE["REDIS_URL"],
        "TESS_GATEWAY_SIGNING_KEY": COMPLETE["TESS_GATEWAY_SIGNING_KEY"],
        "TESS_MODEL_API_KEY": OPENAI["TESS_MODEL_API_KEY"],
        "TESS_MOS_WEBHOOK_SECRET": "mos-secret-from-a-file",
        "TESS_DISCORD_PUBLIC_KEY": DISCORD["TESS_DISCORD_PUBLIC_KEY"],
        "TESS_DISCORD_BOT_TOKEN": DISCORD["TESS_DISCORD_BOT_TOKEN"],
    }
    env = {**COMPLETE, **OPENAI, **DISCORD}
    for name, secret in secrets.items():
        path = tmp_path / name.lower()
        path.write_text(secret + "\n")  # as `echo` or an editor leaves it
        env.pop(name, None)
        env[f"{name}_FILE"] = str(path)
    assert _settings(env, *secrets) == secrets
    assert _settings(env, "DATABASES")["DATABASES"]["default"]["PASSWORD"] == "pw"

    (tmp_path / "tess_gateway_signing_key").unlink()
    refusal = _start(env)
    assert refusal.returncode != 0
    assert "TESS_GATEWAY_SIGNING_KEY_FILE" in refusal.stderr and "cannot be read" in refusal.stderr
    for secret in secrets.values():
        assert secret not in refusal.stderr


def test_setting_a_secret_and_its_file_is_refused(tmp_path):
    path = tmp_path / "key"
    path.write_text(COMPLETE["SECRET_KEY"])
    result = _start({**COMPLETE, "SECRET_KEY_FILE": str(path)})
    assert result.returncode != 0 and "SECRET_KEY and SECRET_KEY_FILE are both set" in result.stderr


def test_a_complete_environment_passes_check_deploy_with_no_issues():
    result = _run(["manage.py", "check", "--deploy", "--fail-level", "DEBUG"], COMPLETE)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_production_defaults_https_only_and_no_static_serving():
    values = _settings(
        COMPLETE,
        "DEBUG",
        "TESS_SERVE_STATIC",
        "SECURE_SSL_REDIRECT",
        "SECURE_HSTS_SECONDS",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
    )
    assert values == {
        "DEBUG": False,
        "TESS_SERVE_STATIC": False,
        "SECURE_SSL_REDIRECT": True,
        "SECURE_HSTS_SECONDS": 31536000,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
    }
    assert _settings({**COMPLETE, "TESS_SSL_REDIRECT": "0"}, "SECURE_SSL_REDIRECT") == {"SECURE_SSL_REDIRECT": False}


def test_plain_http_is_redirected_except_for_liveness_and_metrics():
    # Only routes that answer before touching the database or the cache (the URLs point at nothing real).
    code = (
        "import django, json; django.setup(); from django.test import Client; c = Client(); "
        "plain = c.get('/admin/login/'); relayed = c.get('/healthz', HTTP_X_FORWARDED_PROTO='https'); "
        "print(json.dumps([plain.status_code, plain['Location'], c.get('/healthz').status_code, "
        "relayed['Strict-Transport-Security']]))"
    )
    result = _run(["-c", code], {**COMPLETE, "ALLOWED_HOSTS": "tess.example,testserver"})
    assert result.returncode == 0, result.stderr[-2000:]
    status, location, healthz, hsts = json.loads(result.stdout.strip().splitlines()[-1])
    assert (status, location, healthz) == (301, "https://testserver/admin/login/", 200)
    assert hsts == "max-age=31536000; includeSubDomains; preload"
