"""Production settings: refuse to start, naming everything that is missing, rather than run half-configured.

Every check below reads what ``base`` read from the environment (``NAME`` or ``NAME_FILE``), collects what is
missing, and raises once with the whole list, so one failed start tells the operator everything to fix.
The security settings are the ones ``manage.py check --deploy`` asks for; with a complete environment it
reports no issues.
"""

import re
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import (
    DATABASE_URL,
    REDIS_URL,
    TESS_DISCORD_APPLICATION_ID,
    TESS_DISCORD_BOT_TOKEN,
    TESS_DISCORD_BOT_TOKEN_FILE,
    TESS_DISCORD_ENABLED,
    TESS_DISCORD_PUBLIC_KEY,
    TESS_GATEWAY_SIGNING_KEY,
    TESS_INSTANCE_ID,
    TESS_MODEL,
    TESS_MODEL_ADAPTER,
    TESS_MODEL_API_KEY,
    TESS_MODEL_BASE_URL,
    TESS_MOS_ADAPTER,
    TESS_MOS_WEBHOOK_SECRET,
    TESS_MOS_WEBHOOK_URL,
)
from .env import env_bool, env_int, env_list, env_str

SIGNING_KEY_MIN_CHARS = 32


def _secret_key_problem(key: str) -> str | None:
    # The same bar as Django's security.W009, so `check --deploy` has nothing to add.
    if len(key) < 50 or len(set(key)) < 5 or key.startswith("django-insecure-"):
        return "SECRET_KEY (at least 50 characters, at least 5 of them different; or SECRET_KEY_FILE)"
    return None


def _https_url(value: str) -> bool:
    parts = urlsplit(value)
    return parts.scheme == "https" and bool(parts.netloc)


def _model_problems() -> list[str]:
    # seed 001: the deterministic adapter stands in for a model only when chosen on purpose.
    if env_str("TESS_MODEL_ADAPTER") is None:
        return ["TESS_MODEL_ADAPTER (openai_compatible, or deterministic to run without a model on purpose)"]
    if TESS_MODEL_ADAPTER != "openai_compatible":
        return []
    problems = []
    if not TESS_MODEL_BASE_URL or urlsplit(TESS_MODEL_BASE_URL).scheme not in ("http", "https"):
        problems.append("TESS_MODEL_BASE_URL (the http(s) URL of the chat-completions API)")
    if not TESS_MODEL:
        problems.append("TESS_MODEL")
    if not TESS_MODEL_API_KEY:
        problems.append("TESS_MODEL_API_KEY or TESS_MODEL_API_KEY_FILE (the openai_compatible adapter is selected)")
    return problems


def _gateway_problems() -> list[str]:
    problems = []
    if not TESS_INSTANCE_ID:
        problems.append("TESS_INSTANCE_ID (the name this Tess gives itself to its peers)")
    if len(TESS_GATEWAY_SIGNING_KEY) < SIGNING_KEY_MIN_CHARS:
        problems.append(
            f"TESS_GATEWAY_SIGNING_KEY or TESS_GATEWAY_SIGNING_KEY_FILE (at least {SIGNING_KEY_MIN_CHARS} characters;"
            " it signs outgoing webhooks)"
        )
    if TESS_MOS_ADAPTER == "webhook":
        if not TESS_MOS_WEBHOOK_URL.startswith(("https://", "http://")):
            problems.append("TESS_MOS_WEBHOOK_URL (the webhook Mos adapter is selected)")
        if not TESS_MOS_WEBHOOK_SECRET:
            problems.append("TESS_MOS_WEBHOOK_SECRET (or TESS_GATEWAY_SIGNING_KEY, which it defaults to)")
    return problems


def _discord_problems() -> list[str]:
    if not TESS_DISCORD_ENABLED:
        return []
    problems = []
    if not re.fullmatch(r"[0-9a-fA-F]{64}", TESS_DISCORD_PUBLIC_KEY):
        problems.append("TESS_DISCORD_PUBLIC_KEY (64 hex digits; Discord is enabled)")
    if not TESS_DISCORD_APPLICATION_ID.isdigit():
        problems.append("TESS_DISCORD_APPLICATION_ID (Discord is enabled)")
    if not (TESS_DISCORD_BOT_TOKEN or TESS_DISCORD_BOT_TOKEN_FILE):
        problems.append("TESS_DISCORD_BOT_TOKEN or TESS_DISCORD_BOT_TOKEN_FILE (Discord is enabled)")
    return problems


def _problems() -> list[str]:
    problems = []
    secret = _secret_key_problem(env_str("SECRET_KEY") or "")
    if secret:
        problems.append(secret)
    if env_bool("DEBUG", False):
        problems.append("DEBUG off (production never runs with DEBUG on)")
    hosts = env_list("ALLOWED_HOSTS")
    if not hosts or "*" in hosts:
        # A wildcard would also let any site open websockets with a signed-in user's cookie.
        problems.append("ALLOWED_HOSTS (the host names Tess is served under; '*' is refused)")
    if not DATABASE_URL or not DATABASE_URL.startswith(("postgres://", "postgresql://")):
        problems.append("DATABASE_URL (a PostgreSQL URL; or DATABASE_URL_FILE)")
    if not REDIS_URL or not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
        problems.append("REDIS_URL (a Redis or Valkey URL; or REDIS_URL_FILE)")
    if not _https_url(env_str("TESS_PUBLIC_URL") or ""):
        problems.append("TESS_PUBLIC_URL (the https:// origin approval links start with)")
    return [*problems, *_model_problems(), *_gateway_problems(), *_discord_problems()]


_missing = _problems()
if _missing:
    raise ImproperlyConfigured("Tess refuses to start in production without: " + "; ".join(_missing))

DEBUG = False
SECRET_KEY = env_str("SECRET_KEY") or ""
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS")

# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (see deploy/ and the README).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("TESS_SSL_REDIRECT", True)
# Liveness probes and Prometheus scrape the server directly over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("TESS_HSTS_SECONDS", 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("TESS_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("TESS_HSTS_PRELOAD", True)
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_SECURE = env_bool("TESS_SECURE_COOKIES", True)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
X_FRAME_OPTIONS = "DENY"

# A static file server serves STATIC_ROOT (manage.py collectstatic); set 1 to serve it from daphne instead.
TESS_SERVE_STATIC = env_bool("TESS_SERVE_STATIC", False)

TESS_LOG_FORMAT = "json"
LOGGING["handlers"]["console"]["formatter"] = "json"  # type: ignore[index]  # noqa: F405
