"""Production settings: refuse to start without what a real deployment needs."""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import (
    ALLOWED_HOSTS,
    DATABASE_URL,
    REDIS_URL,
    TESS_MODEL,
    TESS_MODEL_ADAPTER,
    TESS_MODEL_BASE_URL,
    TESS_MOS_ADAPTER,
    TESS_MOS_WEBHOOK_SECRET,
    TESS_MOS_WEBHOOK_URL,
)
from .env import env_bool, env_str

DEBUG = env_bool("DEBUG", False)
TESS_LOG_FORMAT = "json"

_missing = []
SECRET_KEY = env_str("SECRET_KEY") or ""
if len(SECRET_KEY) < 32:
    _missing.append("SECRET_KEY (at least 32 characters)")
if not DATABASE_URL or not DATABASE_URL.startswith(("postgres://", "postgresql://")):
    _missing.append("DATABASE_URL (a PostgreSQL URL)")
if not REDIS_URL:
    _missing.append("REDIS_URL")
if not env_str("ALLOWED_HOSTS"):
    _missing.append("ALLOWED_HOSTS")
if TESS_MODEL_ADAPTER == "openai_compatible" and not (TESS_MODEL and TESS_MODEL_BASE_URL):
    _missing.append("TESS_MODEL and TESS_MODEL_BASE_URL (the openai_compatible model adapter is selected)")
if TESS_MOS_ADAPTER == "webhook" and not (TESS_MOS_WEBHOOK_URL and TESS_MOS_WEBHOOK_SECRET):
    _missing.append("TESS_MOS_WEBHOOK_URL and TESS_MOS_WEBHOOK_SECRET (the webhook Mos adapter is selected)")
if _missing:
    raise ImproperlyConfigured("Tess refuses to start in production without: " + "; ".join(_missing))

assert ALLOWED_HOSTS
SESSION_COOKIE_SECURE = env_bool("TESS_SECURE_COOKIES", True)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
LOGGING["handlers"]["console"]["formatter"] = "json"  # type: ignore[index]  # noqa: F405
