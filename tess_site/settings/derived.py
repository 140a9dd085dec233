"""Settings whose value follows from several variables, as functions of an environment.

``base`` calls each with ``os.environ``; the production rules (``production``) call them with the environment
they check, so both read the same value the same way.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import dj_database_url

from .env import Environ, ImproperlyConfiguredEnv, env_bool, env_choice, env_int, env_str

POOL_MIN_DEFAULT = 2
POOL_MAX_DEFAULT = 8
POOL_TIMEOUT_DEFAULT = 10


def pool_sizes(environ: Environ) -> tuple[int, int, int]:
    """``TESS_DB_POOL_MIN``, ``TESS_DB_POOL_MAX`` and ``TESS_DB_POOL_TIMEOUT`` (seconds), each read strictly."""
    return (
        env_int("TESS_DB_POOL_MIN", POOL_MIN_DEFAULT, minimum=0, environ=environ),
        env_int("TESS_DB_POOL_MAX", POOL_MAX_DEFAULT, minimum=1, environ=environ),
        env_int("TESS_DB_POOL_TIMEOUT", POOL_TIMEOUT_DEFAULT, minimum=1, maximum=300, environ=environ),
    )


def pool_problem(environ: Environ) -> str | None:
    """A pool whose largest size is below its smallest cannot be built (psycopg refuses it at the first query)."""
    low, high, _ = pool_sizes(environ)
    if high < low:
        return f"TESS_DB_POOL_MAX at least TESS_DB_POOL_MIN (now {high} < {low})"
    return None


def databases(environ: Environ, sqlite_path: Path, *, pool_default: bool = True) -> dict[str, Any]:
    """``DATABASES`` from ``DATABASE_URL``; unset means the embedded default, SQLite at ``sqlite_path``.

    On PostgreSQL every process keeps a psycopg connection pool unless ``TESS_DB_POOL`` is off: under an ASGI
    server ``CONN_MAX_AGE`` keeps nothing (each request runs in a thread of its own), so without a pool each
    request opened a backend of its own, and the hot statements prepared on it were lost with it.
    """
    url = env_str("DATABASE_URL", environ=environ)
    if not url:
        return {
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(sqlite_path),
                "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
            }
        }
    # Health checks: a persistent connection the server dropped is replaced before the next request uses it.
    # With a pool, Django hands the check to the pool (ConnectionPool.check_connection on every checkout).
    default = dj_database_url.parse(
        url, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, environ=environ), conn_health_checks=True
    )
    if default["ENGINE"] == "django.db.backends.postgresql":
        if env_bool("TESS_DB_POOL", pool_default, environ=environ):
            problem = pool_problem(environ)
            if problem:
                raise ImproperlyConfiguredEnv(f"{problem} is required")
            low, high, timeout = pool_sizes(environ)
            # Django refuses persistent connections beside a pool: the pool keeps them.
            default["CONN_MAX_AGE"] = 0
            pool = {"min_size": low, "max_size": high, "timeout": timeout, "name": "tess"}
            default.setdefault("OPTIONS", {})["pool"] = pool
        # Tess's hand-written hot statements (tess_site.rows.hot_cursor: token lookup, idempotency, turn
        # reads and appends, audit) are prepared on a connection after this many runs, so PostgreSQL stops
        # parsing and planning them on every request. The ORM keeps client-side binding and never prepares.
        # ``off`` disables it (a pooler in transaction mode without prepared-statement support).
        off = (env_str("DB_PREPARE_THRESHOLD", environ=environ) or "").lower() == "off"
        prepare = None if off else env_int("DB_PREPARE_THRESHOLD", 2, minimum=0, environ=environ)
        default.setdefault("OPTIONS", {})["prepare_threshold"] = prepare
    return {"default": default}


# deterministic: the embedded default, answers from live state with no model; openai_compatible: the openai
# client against any chat-completions base URL; pi: the same endpoint through ``pi --mode rpc --no-tools``
# (providers_app/pi_model.py). The earlier names builtin/openai are still accepted.
_ADAPTER_ALIASES = {"builtin": "deterministic", "openai": "openai_compatible"}


# The adapters that call a model (at TESS_MODEL_BASE_URL, with TESS_MODEL and TESS_MODEL_API_KEY).
MODEL_ADAPTERS = ("openai_compatible", "pi")


def model_adapter(environ: Environ) -> str:
    choices = ("deterministic", "openai_compatible", "pi", *_ADAPTER_ALIASES)
    adapter = env_choice("TESS_MODEL_ADAPTER", choices, "deterministic", environ=environ)
    return _ADAPTER_ALIASES.get(adapter, adapter)


def pi_executable(environ: Environ) -> str:
    """The pi adapter's command: by default the pi that tests/providers_app/install_pi.sh installs."""
    default = str(Path(__file__).resolve().parents[2] / "var" / "node" / "node_modules" / ".bin" / "pi")
    return env_str("TESS_PI_EXECUTABLE", default, environ=environ) or default


def model_name(environ: Environ) -> str | None:
    default = "gpt-5.6-sol" if model_adapter(environ) in MODEL_ADAPTERS else "tess-deterministic"
    return env_str("TESS_MODEL", default, environ=environ)


CONVERSATION_TOKENS_MIN = 1024
CONVERSATION_TOKENS_MAX = 400_000


def conversation_tokens(environ: Environ) -> int:
    """The token budget of a session's conversation in each prompt (summary and earlier turns together)."""
    return env_int(
        "TESS_CONVERSATION_TOKENS",
        16_000,
        minimum=CONVERSATION_TOKENS_MIN,
        maximum=CONVERSATION_TOKENS_MAX,
        environ=environ,
    )


def reasoning_level(environ: Environ) -> str:
    default = "high" if model_adapter(environ) in MODEL_ADAPTERS else "medium"
    return env_choice("TESS_REASONING_LEVEL", ("none", "low", "medium", "high"), default, environ=environ)


def operator_memory(environ: Environ) -> bool:
    """seed 002's kill switch: unset means on; 0/off/false turns operator memory off for every operator."""
    return env_bool("TESS_OPERATOR_MEMORY", True, environ=environ)


def instance_id(environ: Environ) -> str:
    value = env_str("TESS_INSTANCE_ID", "", environ=environ) or ""
    if value and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", value):
        raise ImproperlyConfiguredEnv("TESS_INSTANCE_ID must be 1-64 letters, digits, '.', '_' or '-'")
    return value


def gateway_signing_key(environ: Environ) -> str:
    return env_str("TESS_GATEWAY_SIGNING_KEY", "", environ=environ) or ""


def mos_webhook_secret(environ: Environ) -> str:
    """The Mos webhook's own secret, or the gateway's signing key when it has none."""
    return env_str("TESS_MOS_WEBHOOK_SECRET", "", environ=environ) or gateway_signing_key(environ)


def discord_enabled(environ: Environ) -> bool:
    """On when any Discord key is configured, unless turned off; off also refuses every interaction."""
    keys = ("TESS_DISCORD_PUBLIC_KEY", "TESS_DISCORD_APPLICATION_ID", "TESS_DISCORD_BOT_TOKEN")
    configured = any(env_str(name, environ=environ) for name in (*keys, "TESS_DISCORD_BOT_TOKEN_FILE"))
    return env_bool("TESS_DISCORD_ENABLED", configured, environ=environ)


def discord_public_key(environ: Environ) -> str:
    """Hex; empty (every interaction refused) when unset or when Discord is turned off."""
    if not discord_enabled(environ):
        return ""
    return env_str("TESS_DISCORD_PUBLIC_KEY", "", environ=environ) or ""
