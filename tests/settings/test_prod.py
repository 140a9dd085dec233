"""Production settings: start-up refuses what is missing, naming all of it, and a complete environment
passes ``manage.py check --deploy`` with no issues.

The rules are a function of an environment (``tess_site.settings.production``), so each case runs in this
process; one smoke test loads the real ``tess_site.settings.prod`` in a fresh process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dj_database_url
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings

from tess_site.settings.derived import databases, discord_enabled, discord_public_key, mos_webhook_secret
from tess_site.settings.env import ImproperlyConfiguredEnv, env_str
from tess_site.settings.production import production_settings

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
    "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
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


def _start(env: dict[str, str]) -> dict[str, Any]:
    """What the production settings module does first, as every process (daphne, worker, beat, manage.py)."""
    return production_settings(env)


def _refusal(env: dict[str, str]) -> str:
    with pytest.raises(ImproperlyConfigured) as refused:
        _start(env)
    message = str(refused.value)
    assert message.startswith("Tess refuses to start in production without: "), message
    return message


def _without(*names: str, **extra: str) -> dict[str, str]:
    return {**{k: v for k, v in COMPLETE.items() if k not in names}, **extra}


def test_with_nothing_set_it_names_every_missing_item_at_once():
    refusal = _refusal({})
    for name in (
        "SECRET_KEY",
        "ALLOWED_HOSTS",
        "DATABASE_URL",
        "REDIS_URL",
        "TESS_PUBLIC_URL",
        "TESS_MODEL_ADAPTER",
        "TESS_INSTANCE_ID",
        "TESS_GATEWAY_SIGNING_KEY",
        "EMAIL_BACKEND",
    ):
        assert name in refusal, name


@pytest.mark.parametrize("name", sorted(COMPLETE))
def test_it_names_each_missing_item_alone(name):
    refusal = _refusal(_without(name))
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
    assert name in _refusal({**COMPLETE, name: bad})


def test_the_console_email_backend_is_refused_unless_asked_for_explicitly():
    console = "django.core.mail.backends.console.EmailBackend"
    assert "TESS_ALLOW_CONSOLE_EMAIL=1" in _refusal({**COMPLETE, "EMAIL_BACKEND": console})
    assert _start({**COMPLETE, "EMAIL_BACKEND": console, "TESS_ALLOW_CONSOLE_EMAIL": "1"})
    assert _start({**COMPLETE, "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend"})


def test_it_refuses_debug():
    assert "DEBUG" in _refusal({**COMPLETE, "DEBUG": "1"})


def test_the_deterministic_adapter_needs_choosing_explicitly():
    assert "TESS_MODEL_ADAPTER" in _refusal(_without("TESS_MODEL_ADAPTER"))
    assert _start(COMPLETE)["DEBUG"] is False


@pytest.mark.parametrize("name", ["TESS_MODEL_BASE_URL", "TESS_MODEL_API_KEY"])
def test_the_openai_compatible_adapter_needs_its_base_url_and_key(name):
    env = {**COMPLETE, **{k: v for k, v in OPENAI.items() if k != name}}
    assert name in _refusal(env)


def test_the_openai_compatible_adapter_starts_with_everything():
    assert _start({**COMPLETE, **OPENAI})["SECRET_KEY"] == COMPLETE["SECRET_KEY"]


def test_discord_turned_on_without_its_keys_is_refused_naming_each():
    refusal = _refusal({**COMPLETE, "TESS_DISCORD_ENABLED": "1"})
    for name in DISCORD:
        assert name in refusal, name


def test_a_discord_key_alone_turns_discord_on_and_the_rest_is_asked_for():
    refusal = _refusal({**COMPLETE, "TESS_DISCORD_BOT_TOKEN": "bot-token-for-tests"})
    assert "TESS_DISCORD_PUBLIC_KEY" in refusal and "TESS_DISCORD_APPLICATION_ID" in refusal
    assert "TESS_DISCORD_BOT_TOKEN" not in refusal


def test_discord_with_its_keys_starts_and_turned_off_it_refuses_every_interaction():
    on = {**COMPLETE, **DISCORD}
    _start(on)
    assert (discord_enabled(on), discord_public_key(on)) == (True, "ab" * 32)
    off = {**COMPLETE, **DISCORD, "TESS_DISCORD_ENABLED": "0"}
    _start(off)
    assert (discord_enabled(off), discord_public_key(off)) == (False, "")  # no key: nothing is verified


def test_the_webhook_mos_adapter_needs_its_url_and_signs_with_the_gateway_key_by_default():
    assert "TESS_MOS_WEBHOOK_URL" in _refusal({**COMPLETE, "TESS_MOS_ADAPTER": "webhook"})
    env = {**COMPLETE, "TESS_MOS_ADAPTER": "webhook", "TESS_MOS_WEBHOOK_URL": "https://mos.example/hook"}
    _start(env)
    assert mos_webhook_secret(env) == COMPLETE["TESS_GATEWAY_SIGNING_KEY"]
    own = {**env, "TESS_MOS_WEBHOOK_SECRET": "mos-own-secret"}
    _start(own)
    assert mos_webhook_secret(own) == "mos-own-secret"


def test_a_malformed_instance_id_is_refused():
    with pytest.raises(ImproperlyConfiguredEnv, match="TESS_INSTANCE_ID"):
        _start({**COMPLETE, "TESS_INSTANCE_ID": "tess eu/1"})


SECRETS = {
    "SECRET_KEY": COMPLETE["SECRET_KEY"],
    "DATABASE_URL": COMPLETE["DATABASE_URL"],
    "REDIS_URL": COMPLETE["REDIS_URL"],
    "TESS_GATEWAY_SIGNING_KEY": COMPLETE["TESS_GATEWAY_SIGNING_KEY"],
    "TESS_MODEL_API_KEY": OPENAI["TESS_MODEL_API_KEY"],
    "TESS_MOS_WEBHOOK_SECRET": "mos-secret-from-a-file",
    "TESS_DISCORD_PUBLIC_KEY": DISCORD["TESS_DISCORD_PUBLIC_KEY"],
    "TESS_DISCORD_BOT_TOKEN": DISCORD["TESS_DISCORD_BOT_TOKEN"],
}


def _secrets_in_files(directory: Path) -> dict[str, str]:
    """The complete environment (OpenAI and Discord on) with every secret in a file, as `echo` leaves it."""
    env = {**COMPLETE, **OPENAI, **DISCORD}
    for name, secret in SECRETS.items():
        path = directory / name.lower()
        path.write_text(secret + "\n")
        env.pop(name, None)
        env[f"{name}_FILE"] = str(path)
    return env


def test_every_secret_can_come_from_a_file_and_none_is_printed_when_one_cannot_be_read(tmp_path):
    env = _secrets_in_files(tmp_path)
    assert _start(env)["SECRET_KEY"] == SECRETS["SECRET_KEY"]
    assert {name: env_str(name, environ=env) for name in SECRETS} == SECRETS
    assert mos_webhook_secret(env) == SECRETS["TESS_MOS_WEBHOOK_SECRET"]
    assert discord_public_key(env) == SECRETS["TESS_DISCORD_PUBLIC_KEY"]
    assert dj_database_url.parse(env_str("DATABASE_URL", environ=env) or "")["PASSWORD"] == "pw"

    (tmp_path / "tess_gateway_signing_key").unlink()
    with pytest.raises(ImproperlyConfiguredEnv) as refused:
        _start(env)
    assert "TESS_GATEWAY_SIGNING_KEY_FILE" in str(refused.value) and "cannot be read" in str(refused.value)
    for secret in SECRETS.values():
        assert secret not in str(refused.value)


def test_setting_a_secret_and_its_file_is_refused(tmp_path):
    path = tmp_path / "key"
    path.write_text(COMPLETE["SECRET_KEY"])
    with pytest.raises(ImproperlyConfiguredEnv, match="SECRET_KEY and SECRET_KEY_FILE are both set"):
        _start({**COMPLETE, "SECRET_KEY_FILE": str(path)})


def test_the_security_settings_can_be_relaxed_only_where_a_proxy_does_the_work():
    values = _start({**COMPLETE, "TESS_SECURE_COOKIES": "0", "TESS_HSTS_SECONDS": "0", "TESS_SERVE_STATIC": "1"})
    assert (values["SESSION_COOKIE_SECURE"], values["CSRF_COOKIE_SECURE"]) == (False, False)
    assert values["SECURE_HSTS_SECONDS"] == 0 and values["TESS_SERVE_STATIC"] is True
    assert values["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")
    with pytest.raises(ImproperlyConfiguredEnv, match="TESS_HSTS_SECONDS"):
        _start({**COMPLETE, "TESS_HSTS_SECONDS": "-1"})


@pytest.mark.parametrize("adapter", ["openai", "openai_compatible"])
def test_an_earlier_adapter_name_is_held_to_the_same_rules(adapter):
    refusal = _refusal({**COMPLETE, "TESS_MODEL_ADAPTER": adapter})
    assert "TESS_MODEL_BASE_URL" in refusal and "TESS_MODEL_API_KEY" in refusal


def test_production_defaults_https_only_and_no_static_serving():
    values = _start(COMPLETE)
    assert {
        name: values[name]
        for name in (
            "DEBUG",
            "TESS_SERVE_STATIC",
            "SECURE_SSL_REDIRECT",
            "SECURE_HSTS_SECONDS",
            "SESSION_COOKIE_SECURE",
            "CSRF_COOKIE_SECURE",
        )
    } == {
        "DEBUG": False,
        "TESS_SERVE_STATIC": False,
        "SECURE_SSL_REDIRECT": True,
        "SECURE_HSTS_SECONDS": 31536000,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
    }
    assert _start({**COMPLETE, "TESS_SSL_REDIRECT": "0"})["SECURE_SSL_REDIRECT"] is False


def test_plain_http_is_redirected_except_for_liveness_and_metrics():
    # Only routes that answer before touching the database or the cache.
    values = _start({**COMPLETE, "ALLOWED_HOSTS": "tess.example,testserver"})
    security = {name: value for name, value in values.items() if name.startswith("SECURE_")}
    with override_settings(ALLOWED_HOSTS=values["ALLOWED_HOSTS"], **security):
        client = Client()
        plain = client.get("/admin/login/")
        relayed = client.get("/healthz", HTTP_X_FORWARDED_PROTO="https")
        healthz = client.get("/healthz").status_code
    assert (plain.status_code, plain["Location"], healthz) == (301, "https://testserver/admin/login/", 200)
    assert relayed["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"


# --- the real module, in a fresh process (settings are read once per process) --------------------------------


def _env(env: dict[str, str]) -> dict[str, str]:
    """The test's environment without anything Tess reads (so the machine's own variables cannot leak in)."""
    own = ("TESS_", "DJANGO_", "SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS", "DEBUG", "PROMETHEUS_")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(own)}
    return {**clean, **env, "DJANGO_SETTINGS_MODULE": "tess_site.settings.prod"}


def test_the_production_module_loads_its_rules_and_passes_check_deploy(tmp_path):
    """One process loads ``tess_site.settings.prod`` as daphne, the worker and manage.py do, with every secret
    in a file: ``check --deploy`` finds no issues and the loaded settings are the rules' values."""
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "from django.core.management import call_command; "
        "call_command('check', deploy=True, fail_level='DEBUG'); "
        f"print(json.dumps({{n: getattr(s, n) for n in {[*SECRETS, 'DATABASES', 'DEBUG', 'LOGGING']!r}}}, default=str))"
    )
    env = _secrets_in_files(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=_env(env), capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert "System check identified no issues (0 silenced)." in result.stdout
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert {name: loaded[name] for name in SECRETS} == SECRETS
    assert loaded["DATABASES"]["default"]["PASSWORD"] == "pw" and loaded["DEBUG"] is False
    assert loaded["DATABASES"]["default"]["OPTIONS"]["pool"]["max_size"] == 8
    assert loaded["LOGGING"]["handlers"]["console"]["formatter"] == "json"

    refused = subprocess.run(
        [sys.executable, "-c", "import tess_site.settings.prod"],
        cwd=ROOT,
        env=_env({}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode != 0 and "Tess refuses to start in production without: SECRET_KEY" in refused.stderr


def test_postgresql_gets_a_pool_sized_by_the_environment_with_health_checks_and_no_persistent_connections():
    env = {**COMPLETE, "TESS_DB_POOL_MIN": "1", "TESS_DB_POOL_MAX": "5", "TESS_DB_POOL_TIMEOUT": "7"}
    production_settings(env)
    default = databases(env, Path("unused.sqlite3"))["default"]
    assert default["OPTIONS"]["pool"] == {"min_size": 1, "max_size": 5, "timeout": 7, "name": "tess"}
    # Django hands ConnectionPool.check_connection to the pool when health checks are on; it refuses a pool
    # beside persistent connections.
    assert default["CONN_HEALTH_CHECKS"] is True and default["CONN_MAX_AGE"] == 0
    assert default["OPTIONS"]["prepare_threshold"] == 2  # prepared statements live on the pool's connections


def test_without_a_pool_connections_persist_and_sqlite_never_has_one():
    default = databases({**COMPLETE, "TESS_DB_POOL": "0", "DB_CONN_MAX_AGE": "30"}, Path("x"))["default"]
    assert "pool" not in default["OPTIONS"] and default["CONN_MAX_AGE"] == 30
    sqlite = databases({}, Path("tess.sqlite3"))["default"]
    assert sqlite["ENGINE"] == "django.db.backends.sqlite3" and "pool" not in sqlite["OPTIONS"]


@pytest.mark.parametrize(
    ("name", "bad"), [("TESS_DB_POOL_MIN", "-1"), ("TESS_DB_POOL_MAX", "0"), ("TESS_DB_POOL_TIMEOUT", "0")]
)
def test_a_pool_size_or_wait_out_of_range_is_refused(name, bad):
    with pytest.raises(ImproperlyConfiguredEnv, match=name):
        production_settings({**COMPLETE, name: bad})


def test_a_pool_whose_largest_size_is_below_its_smallest_is_refused_but_a_large_one_is_not():
    refusal = _refusal({**COMPLETE, "TESS_DB_POOL_MIN": "6", "TESS_DB_POOL_MAX": "4"})
    assert "TESS_DB_POOL_MAX at least TESS_DB_POOL_MIN (now 4 < 6)" in refusal
    with pytest.raises(ImproperlyConfiguredEnv, match="TESS_DB_POOL_MAX at least TESS_DB_POOL_MIN"):
        databases({**COMPLETE, "TESS_DB_POOL_MIN": "6", "TESS_DB_POOL_MAX": "4"}, Path("x"))
    # More connections than the server's threads can use at once is allowed: they are opened only on demand.
    production_settings({**COMPLETE, "TESS_DB_POOL_MIN": "2", "TESS_DB_POOL_MAX": "500"})
    # Without a pool its sizes mean nothing, and nothing is refused.
    production_settings({**COMPLETE, "TESS_DB_POOL": "0", "TESS_DB_POOL_MIN": "6", "TESS_DB_POOL_MAX": "4"})


def test_a_heartbeat_staleness_shorter_than_two_checks_is_refused():
    refusal = _refusal(_without(TESS_PROVIDER_HEARTBEAT_SECONDS="30", TESS_HEARTBEAT_STALE_SECONDS="45"))
    assert "TESS_HEARTBEAT_STALE_SECONDS of at least two heartbeat intervals (60 s" in refusal
    _start(_without(TESS_PROVIDER_HEARTBEAT_SECONDS="30", TESS_HEARTBEAT_STALE_SECONDS="60"))
    _start(_without(TESS_PROVIDER_HEARTBEAT_SECONDS="20"))  # the default, three intervals, follows the interval
