"""Production's rules as a function of an environment: refuse to start, naming everything that is missing,
rather than run half-configured.

``production_settings`` reads what ``base`` reads (``NAME`` or ``NAME_FILE``) from the mapping it is given,
collects what is missing, and raises once with the whole list, so one failed start tells the operator
everything to fix. ``prod`` calls it with ``os.environ``. The security settings are the ones
``manage.py check --deploy`` asks for; with a complete environment it reports no issues.
"""

from __future__ import annotations

import re
import shlex
import shutil
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from .derived import (
    CONVERSATION_TOKENS_MAX,
    CONVERSATION_TOKENS_MIN,
    MODEL_ADAPTERS,
    conversation_tokens,
    discord_enabled,
    discord_public_key,
    gateway_signing_key,
    instance_id,
    model_adapter,
    model_name,
    mos_webhook_secret,
    pi_executable,
    pool_problem,
)
from .env import Environ, ImproperlyConfiguredEnv, env_bool, env_choice, env_int, env_list, env_str

SIGNING_KEY_MIN_CHARS = 32


def _secret_key_problem(key: str) -> str | None:
    # The same bar as Django's security.W009, so `check --deploy` has nothing to add.
    if len(key) < 50 or len(set(key)) < 5 or key.startswith("django-insecure-"):
        return "SECRET_KEY (at least 50 characters, at least 5 of them different; or SECRET_KEY_FILE)"
    return None


def _https_url(value: str) -> bool:
    parts = urlsplit(value)
    return parts.scheme == "https" and bool(parts.netloc)


def _model_problems(environ: Environ) -> list[str]:
    # seed 001: the deterministic adapter stands in for a model only when chosen on purpose.
    if env_str("TESS_MODEL_ADAPTER", environ=environ) is None:
        return ["TESS_MODEL_ADAPTER (openai_compatible or pi, or deterministic to run without a model on purpose)"]
    adapter = model_adapter(environ)
    if adapter not in MODEL_ADAPTERS:
        return []
    problems = []
    base_url = env_str("TESS_MODEL_BASE_URL", environ=environ)
    if not base_url or urlsplit(base_url).scheme not in ("http", "https"):
        problems.append("TESS_MODEL_BASE_URL (the http(s) URL of the chat-completions API)")
    if not model_name(environ):
        problems.append("TESS_MODEL")
    if not env_str("TESS_MODEL_API_KEY", environ=environ):
        problems.append(f"TESS_MODEL_API_KEY or TESS_MODEL_API_KEY_FILE (the {adapter} adapter is selected)")
    if adapter == "pi":
        command = shlex.split(pi_executable(environ))
        if not command or shutil.which(command[0]) is None:
            problems.append(
                "TESS_PI_EXECUTABLE (the pi command, not found; bash tests/providers_app/install_pi.sh installs it)"
            )
    return problems


def _conversation_problems(environ: Environ) -> list[str]:
    try:
        conversation_tokens(environ)
    except ImproperlyConfiguredEnv:
        return [
            f"TESS_CONVERSATION_TOKENS (an integer from {CONVERSATION_TOKENS_MIN} to {CONVERSATION_TOKENS_MAX}: the "
            "tokens of earlier conversation each prompt carries)"
        ]
    return []


def _gateway_problems(environ: Environ) -> list[str]:
    problems = []
    if not instance_id(environ):
        problems.append("TESS_INSTANCE_ID (the name this Tess gives itself to its peers)")
    if len(gateway_signing_key(environ)) < SIGNING_KEY_MIN_CHARS:
        problems.append(
            f"TESS_GATEWAY_SIGNING_KEY or TESS_GATEWAY_SIGNING_KEY_FILE (at least {SIGNING_KEY_MIN_CHARS} characters;"
            " it signs outgoing webhooks)"
        )
    if env_choice("TESS_MOS_ADAPTER", ("none", "redis", "webhook"), "none", environ=environ) == "webhook":
        if not (env_str("TESS_MOS_WEBHOOK_URL", "", environ=environ) or "").startswith(("https://", "http://")):
            problems.append("TESS_MOS_WEBHOOK_URL (the webhook Mos adapter is selected)")
        if not mos_webhook_secret(environ):
            problems.append("TESS_MOS_WEBHOOK_SECRET (or TESS_GATEWAY_SIGNING_KEY, which it defaults to)")
    return problems


def _discord_problems(environ: Environ) -> list[str]:
    if not discord_enabled(environ):
        return []
    problems = []
    if not re.fullmatch(r"[0-9a-fA-F]{64}", discord_public_key(environ)):
        problems.append("TESS_DISCORD_PUBLIC_KEY (64 hex digits; Discord is enabled)")
    if not (env_str("TESS_DISCORD_APPLICATION_ID", "", environ=environ) or "").isdigit():
        problems.append("TESS_DISCORD_APPLICATION_ID (Discord is enabled)")
    token = env_str("TESS_DISCORD_BOT_TOKEN", environ=environ)
    if not (token or env_str("TESS_DISCORD_BOT_TOKEN_FILE", environ=environ)):
        problems.append("TESS_DISCORD_BOT_TOKEN or TESS_DISCORD_BOT_TOKEN_FILE (Discord is enabled)")
    return problems


CONSOLE_EMAIL = "django.core.mail.backends.console.EmailBackend"


def _email_problems(environ: Environ) -> list[str]:
    # One-time approval links travel by e-mail; the console backend would print them into the web unit's journal.
    backend = env_str("EMAIL_BACKEND", environ=environ)
    if backend and (backend != CONSOLE_EMAIL or env_bool("TESS_ALLOW_CONSOLE_EMAIL", False, environ=environ)):
        return []
    return [
        "EMAIL_BACKEND (approval links are e-mailed: smtp, or dummy to send none; the console backend would "
        "write live links to the journal, so it needs TESS_ALLOW_CONSOLE_EMAIL=1 as well)"
    ]


def _heartbeat_problem(environ: Environ) -> str | None:
    interval = env_int("TESS_PROVIDER_HEARTBEAT_SECONDS", 30, minimum=5, environ=environ)
    stale = env_int("TESS_HEARTBEAT_STALE_SECONDS", 3 * interval, minimum=10, environ=environ)
    if stale >= 2 * interval:
        return None
    return (
        f"TESS_HEARTBEAT_STALE_SECONDS of at least two heartbeat intervals ({2 * interval} s with "
        f"TESS_PROVIDER_HEARTBEAT_SECONDS={interval}): one slow check must not mark an instance down"
    )


def production_problems(environ: Environ) -> list[str]:
    """What ``environ`` lacks for production, each item naming its variable; empty when nothing does."""
    problems = []
    secret = _secret_key_problem(env_str("SECRET_KEY", environ=environ) or "")
    if secret:
        problems.append(secret)
    if env_bool("DEBUG", False, environ=environ):
        problems.append("DEBUG off (production never runs with DEBUG on)")
    hosts = env_list("ALLOWED_HOSTS", environ=environ)
    if not hosts or "*" in hosts:
        # A wildcard would also let any site open websockets with a signed-in user's cookie.
        problems.append("ALLOWED_HOSTS (the host names Tess is served under; '*' is refused)")
    database_url = env_str("DATABASE_URL", environ=environ)
    if not database_url or not database_url.startswith(("postgres://", "postgresql://")):
        problems.append("DATABASE_URL (a PostgreSQL URL; or DATABASE_URL_FILE)")
    redis_url = env_str("REDIS_URL", environ=environ)
    if not redis_url or not redis_url.startswith(("redis://", "rediss://", "unix://")):
        problems.append("REDIS_URL (a Redis or Valkey URL; or REDIS_URL_FILE)")
    if env_bool("TESS_DB_POOL", True, environ=environ) and (problem := pool_problem(environ)):
        problems.append(problem)
    if problem := _heartbeat_problem(environ):
        problems.append(problem)
    if not _https_url(env_str("TESS_PUBLIC_URL", environ=environ) or ""):
        problems.append("TESS_PUBLIC_URL (the https:// origin approval links start with)")
    return [
        *problems,
        *_email_problems(environ),
        *_model_problems(environ),
        *_conversation_problems(environ),
        *_gateway_problems(environ),
        *_discord_problems(environ),
    ]


def production_settings(environ: Environ) -> dict[str, Any]:
    """The settings production sets on top of ``base``; raises ImproperlyConfigured naming all that is missing."""
    missing = production_problems(environ)
    if missing:
        raise ImproperlyConfigured("Tess refuses to start in production without: " + "; ".join(missing))
    secure_cookies = env_bool("TESS_SECURE_COOKIES", True, environ=environ)
    return {
        "DEBUG": False,
        "SECRET_KEY": env_str("SECRET_KEY", environ=environ) or "",
        "ALLOWED_HOSTS": env_list("ALLOWED_HOSTS", environ=environ),
        # Behind a TLS-terminating proxy that sets X-Forwarded-Proto (see deploy/ and the README).
        "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"),
        "SECURE_SSL_REDIRECT": env_bool("TESS_SSL_REDIRECT", True, environ=environ),
        # Liveness probes and Prometheus scrape the server directly over plain HTTP.
        "SECURE_REDIRECT_EXEMPT": [r"^healthz$", r"^metrics$"],
        "SECURE_HSTS_SECONDS": env_int("TESS_HSTS_SECONDS", 31536000, minimum=0, environ=environ),
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": env_bool("TESS_HSTS_INCLUDE_SUBDOMAINS", True, environ=environ),
        "SECURE_HSTS_PRELOAD": env_bool("TESS_HSTS_PRELOAD", True, environ=environ),
        "SECURE_CONTENT_TYPE_NOSNIFF": True,
        "SESSION_COOKIE_SECURE": secure_cookies,
        "CSRF_COOKIE_SECURE": secure_cookies,
        "X_FRAME_OPTIONS": "DENY",
        # A static file server serves STATIC_ROOT (manage.py collectstatic); set 1 to serve it from daphne instead.
        "TESS_SERVE_STATIC": env_bool("TESS_SERVE_STATIC", False, environ=environ),
        "TESS_LOG_FORMAT": "json",
    }
