"""Settings every environment shares. Values that differ between machines come from the environment."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .derived import (
    conversation_tokens,
    databases,
    discord_enabled,
    discord_public_key,
    gateway_signing_key,
    instance_id,
    model_adapter,
    model_name,
    mos_webhook_secret,
    operator_memory,
    pi_executable,
    reasoning_level,
)
from .env import env_bool, env_choice, env_int, env_list, env_networks, env_str

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(env_str("TESS_VAR_DIR", str(BASE_DIR / "var")) or BASE_DIR / "var")

SECRET_KEY = env_str("SECRET_KEY") or "dev-only-insecure-key-never-used-in-production"
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "guardian",
    "channels",
    "tess_site",
    "tess_site.accounts",
    "tess_site.audit",
    "approvals_app",
    "memory_app",
    "providers_app",
    "sessions_app",
]

MIDDLEWARE = [
    "tess_site.metrics_http.RequestMetricsMiddleware",  # first: its latency covers the whole chain
    "tess_site.middleware.CorrelationIdMiddleware",
    # REMOTE_ADDR is the client behind TESS_TRUSTED_PROXIES, before any throttle, limit or log reads it.
    "tess_site.middleware.ClientAddressMiddleware",
    # NUL, lone surrogates, NaN, absurd nesting and oversized bodies: typed 400/413 for every route.
    "tess_site.input_guard.RefuseUnstorableInputMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "tess_site.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "tess_site.middleware.ApiErrorMiddleware",
    "tess_site.middleware.RefuseIdentityFieldsMiddleware",
]

ROOT_URLCONF = "tess_site.urls"
ASGI_APPLICATION = "tess_site.asgi.application"
WSGI_APPLICATION = "tess_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database -------------------------------------------------------------------------------------
# DATABASE_URL unset means the embedded default: SQLite under var/ (settings/derived.py).
DATABASE_URL = env_str("DATABASE_URL")
DATABASES = databases(os.environ, VAR_DIR / "tess.sqlite3")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis: channel layer, celery broker, cache ---------------------------------------------------
# REDIS_URL unset means the in-process channel layer and Celery tasks run in-process.
REDIS_URL = env_str("REDIS_URL")
TESS_CHANNEL_PREFIX = env_str("TESS_CHANNEL_PREFIX", "tess") or "tess"
if REDIS_URL:
    CHANNEL_LAYERS: dict[str, Any] = {
        "default": {
            # A burst of websockets connecting at once waits for a free Redis connection instead of failing.
            "BACKEND": "tess_site.channel_layer.WaitingRedisChannelLayer",
            "CONFIG": {
                # channels-redis blocks up to 5 s waiting for a message (BZPOPMIN); redis-py's default socket
                # read timeout is also 5 s, so an idle socket's read timed out first and closed it (1011).
                # The read timeout stays finite, to notice a Redis that went away, but outlasts the wait.
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": 30,
                        "socket_connect_timeout": 5,
                        "max_connections": env_int("TESS_REDIS_LAYER_CONNECTIONS", 100, minimum=2, maximum=10_000),
                        "timeout": 10,
                    }
                ],
                "prefix": f"{TESS_CHANNEL_PREFIX}:asgi",
                "capacity": 1000,
            },
        }
    }
    CACHES: dict[str, Any] = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": f"{TESS_CHANNEL_PREFIX}:cache",
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tess"}}

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_TASK_ALWAYS_EAGER = not bool(REDIS_URL)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
TESS_LEASE_SECONDS = env_int("TESS_LEASE_SECONDS", 30, minimum=5)
TESS_SWEEP_INTERVAL_SECONDS = env_int("TESS_SWEEP_INTERVAL_SECONDS", 15, minimum=1)
CELERY_BEAT_SCHEDULE = {
    "sweep-expired-leases": {
        "task": "tess_site.tasks.sweep_expired_leases",
        "schedule": float(TESS_SWEEP_INTERVAL_SECONDS),
    },
}

# --- auth ----------------------------------------------------------------------------------------
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
GUARDIAN_RAISE_403 = True
ANONYMOUS_USER_NAME = None  # guardian: no anonymous object permissions in Tess.
TESS_TOKEN_DEFAULT_DAYS = env_int("TESS_TOKEN_DEFAULT_DAYS", 90, minimum=1)
TESS_TOKEN_RATE = env_str("TESS_TOKEN_RATE", "10/min") or "10/min"
# Reverse proxies whose X-Forwarded-* headers are believed (CIDR list); the default is a proxy on this machine.
TESS_TRUSTED_PROXIES = env_networks("TESS_TRUSTED_PROXIES", ["127.0.0.1/32", "::1/128"])
# Failed admin sign-ins allowed per client address and per username in the window, e.g. "10/min".
TESS_LOGIN_RATE = env_str("TESS_LOGIN_RATE", "10/min") or "10/min"

# --- model adapter and policy (reported by health, never with credentials) -----------------------
# deterministic (the embedded default) or openai_compatible; see settings/derived.py.
TESS_MODEL_ADAPTER = model_adapter(os.environ)
TESS_MODEL = model_name(os.environ)
TESS_MODEL_BASE_URL = env_str("TESS_MODEL_BASE_URL")
TESS_MODEL_API_KEY = env_str("TESS_MODEL_API_KEY")
TESS_REASONING_LEVEL = reasoning_level(os.environ)
TESS_MODEL_TIMEOUT_SECONDS = env_int("TESS_MODEL_TIMEOUT_SECONDS", 60, minimum=1, maximum=600)
TESS_MODEL_STREAM = env_bool("TESS_MODEL_STREAM", True)
# The pi adapter (providers_app/pi_model.py): the pi command, the directory Tess owns for pi's agent config
# and the per-session pi files, and the context window pi compacts against.
TESS_PI_EXECUTABLE = pi_executable(os.environ)
TESS_PI_MODEL_DIR = Path(env_str("TESS_PI_MODEL_DIR", str(VAR_DIR / "pi-model")) or VAR_DIR / "pi-model")
TESS_PI_CONTEXT_TOKENS = env_int("TESS_PI_CONTEXT_TOKENS", 272_000, minimum=4096)
# A session's pi process is kept this long after its turn for the next (0: a process per turn), at most this
# many per worker process (each holds about 140 MB).
TESS_PI_KEEP_SECONDS = env_int("TESS_PI_KEEP_SECONDS", 600, minimum=0)
TESS_PI_KEEP_MAX = env_int("TESS_PI_KEEP_MAX", 4, minimum=0)
# Tokens of a session's earlier conversation each prompt carries; older turns are summarised beyond it.
TESS_CONVERSATION_TOKENS = conversation_tokens(os.environ)
# Sessions whose conversation read so far each process keeps, to read only what is new at the next turn.
TESS_CONVERSATION_CACHE_SESSIONS = env_int("TESS_CONVERSATION_CACHE_SESSIONS", 256, minimum=0, maximum=100_000)
TESS_TOOL_POLICY = env_choice("TESS_TOOL_POLICY", ("read_only", "approval_required"), "approval_required")

# --- REST API -------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tess_site.accounts.authentication.PersonalTokenAuthentication",
        "tess_site.accounts.authentication.TenantSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["tess_site.accounts.permissions.IsTenantMember"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "tess_site.api_schema.TessAutoSchema",
    "EXCEPTION_HANDLER": "tess_site.errors.api_exception_handler",
    "DEFAULT_THROTTLE_RATES": {"token": TESS_TOKEN_RATE},
    # The client address is ClientAddressMiddleware's REMOTE_ADDR; DRF must not read X-Forwarded-For itself.
    "NUM_PROXIES": 0,
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Tess API",
    "DESCRIPTION": "Operator console for a fleet of AI coding agents.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Choice sets that share a field name ("status", "kind") each get their own enum name in the schema.
    "ENUM_NAME_OVERRIDES": {
        "CodingMemoryStatusEnum": "memory_app.coding.models.CodingMemoryEntry.Status",
        "CodingMemoryKindEnum": "memory_app.coding.models.CodingMemoryEntry.Kind",
        "InboxItemKindEnum": "approvals_app.inbox_items.KINDS",
    },
}

# --- i18n, static ---------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS: list[Any] = [BASE_DIR / "static"]  # the drawer's JavaScript and CSS (static/tess/)
# The drawer's terminal (xterm.js), installed at pinned versions by `npm ci` in frontend/ (scripts/frontend.sh)
# and served from here like Tess's own files; collectstatic copies them too. Absent before that install.
_NODE_MODULES = BASE_DIR / "frontend" / "node_modules"
STATICFILES_DIRS += [
    (prefix, _NODE_MODULES / package)
    for prefix, package in (
        ("vendor/xterm", "@xterm/xterm/lib"),
        ("vendor/xterm/css", "@xterm/xterm/css"),
        ("vendor/xterm-addon-fit", "@xterm/addon-fit/lib"),
    )
    if (_NODE_MODULES / package).is_dir()
]
# The ASGI app serves static files itself (daphne has no static serving); 0 when a web server serves STATIC_ROOT.
TESS_SERVE_STATIC = env_bool("TESS_SERVE_STATIC", True)
# Content-Security-Policy of every response (tess_site/csp.py); empty means the built-in policy.
TESS_CSP = env_str("TESS_CSP", "") or ""
LOGIN_URL = "admin:login"

# --- logging --------------------------------------------------------------------------------------
TESS_LOG_FORMAT = env_choice("TESS_LOG_FORMAT", ("json", "text"), "text")
TESS_LOG_LEVEL = env_choice("TESS_LOG_LEVEL", ("DEBUG", "INFO", "WARNING", "ERROR"), "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "correlation": {"()": "tess_site.logging.CorrelationIdFilter"},
        "redact": {"()": "tess_site.logging.RedactSecretsFilter"},
    },
    "formatters": {
        "text": {
            "()": "tess_site.logging.RedactingFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s [%(correlation_id)s] %(message)s",
        },
        "json": {
            "()": "tess_site.logging.RedactingJsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(correlation_id)s %(message)s",
            "rename_fields": {"asctime": "ts", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": TESS_LOG_FORMAT,
            "filters": ["correlation", "redact"],
        },
    },
    "root": {"handlers": ["console"], "level": TESS_LOG_LEVEL},
    "loggers": {
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "daphne": {"handlers": ["console"], "level": "WARNING", "propagate": False},
        # The HTTP and websocket access log of `python -m tess_site.asgi_server` (deploy/), masked like the rest.
        "tess.access": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}

# --- runtime providers ------------------------------------------------------------------------------
# Named instances: {"name": {"kind": "tmux", ...kind-specific config}}. JSON in TESS_RUNTIME_PROVIDERS.
import json as _json  # noqa: E402

TESS_RUNTIME_PROVIDERS: dict[str, dict[str, Any]] = _json.loads(env_str("TESS_RUNTIME_PROVIDERS", "{}") or "{}")

# The usage ledger's price table, used only for steps whose source reports tokens without a cost:
# {"model": {"input": "1.25", "output": "10", "cache_read": "0.125", "cache_write": "0", "currency": "USD"}},
# prices per million tokens. A model missing here is recorded as unpriced, never as free.
TESS_MODEL_PRICES: dict[str, dict[str, Any]] = _json.loads(env_str("TESS_MODEL_PRICES", "{}") or "{}")
# What a model turn reserves against budgets before the ledger has any turn of that model to go by.
TESS_BUDGET_TURN_TOKENS = env_int("TESS_BUDGET_TURN_TOKENS", 20000, minimum=0)

# --- the operator-tool catalog -----------------------------------------------------------
# Each unset (the default) means that tool's capability is absent and its catalog entries fail closed.
from .tools_env import env_bootstrap_commands, env_git_repos, env_mcp_servers  # noqa: E402

# Local git repositories for GitOps: {"name": "/abs/path"} or {"name": {"path": ..., "tenants": [...]}}.
TESS_GITOPS_REPOS = env_git_repos("TESS_GITOPS_REPOS")
TESS_GITOPS_TIMEOUT_SECONDS = env_int("TESS_GITOPS_TIMEOUT_SECONDS", 10, minimum=1, maximum=120)
# Runtime bootstrap: {"name": {"provider": "<tmux instance>", "argv": [...]}}; started only after approval.
TESS_BOOTSTRAP_COMMANDS = env_bootstrap_commands("TESS_BOOTSTRAP_COMMANDS")
# MCP servers over stdio for discovery: {"name": ["program", "arg", ...]}.
TESS_MCP_SERVERS = env_mcp_servers("TESS_MCP_SERVERS")
TESS_MCP_TIMEOUT_SECONDS = env_int("TESS_MCP_TIMEOUT_SECONDS", 10, minimum=1, maximum=120)
# Fleet diagnostics: every database read runs under this statement timeout; every check under its own.
TESS_DIAGNOSTICS_STATEMENT_TIMEOUT_MS = env_int("TESS_DIAGNOSTICS_STATEMENT_TIMEOUT_MS", 2000, minimum=100)
TESS_DIAGNOSTICS_CHECK_SECONDS = env_int("TESS_DIAGNOSTICS_CHECK_SECONDS", 5, minimum=1, maximum=60)

# --- operator memory (seed 002) ----------------------------------------------------------------------
# The kill switch: unset means on (a database is always bound, the embedded SQLite included); 0/off/false
# turns operator memory off for every operator. A runtime switch in the database does the same without a
# restart (``manage.py tess_memory_switch``).
TESS_OPERATOR_MEMORY = operator_memory(os.environ)

# --- sessions and the live stream (sessions_app) ----------------------------------------------------
TESS_ATTACH_IDLE_SECONDS = env_int("TESS_ATTACH_IDLE_SECONDS", 900, minimum=10)
# A browser session's or a CLI profile's binding to the session it uses ends this long after its last use.
TESS_CLIENT_BINDING_SECONDS = env_int("TESS_CLIENT_BINDING_SECONDS", 43200, minimum=60)
TESS_STREAM_HEARTBEAT_SECONDS = env_int("TESS_STREAM_HEARTBEAT_SECONDS", 25, minimum=1, maximum=30)
TESS_STREAM_RECHECK_SECONDS = env_int("TESS_STREAM_RECHECK_SECONDS", 5, minimum=1, maximum=60)
TESS_IDEMPOTENCY_HOURS = env_int("TESS_IDEMPOTENCY_HOURS", 24, minimum=1)
TESS_IDEMPOTENCY_LOCK_SECONDS = env_int("TESS_IDEMPOTENCY_LOCK_SECONDS", 60, minimum=5)
TESS_PUMP_INTERVAL_MS = env_int("TESS_PUMP_INTERVAL_MS", 500, minimum=50)
# Without REDIS_URL the pump runs as a thread of the serving process; off, nothing pumps output.
TESS_EMBEDDED_PUMP = env_bool("TESS_EMBEDDED_PUMP", True)
CELERY_BEAT_SCHEDULE.update(
    {
        "sessions-pump": {"task": "sessions_app.tasks.pump_sessions", "schedule": TESS_PUMP_INTERVAL_MS / 1000},
        "sessions-requeue-due": {"task": "sessions_app.tasks.requeue_due_work", "schedule": 15.0},
        "sessions-purge-idempotency": {"task": "sessions_app.tasks.purge_idempotency_records", "schedule": 3600.0},
        "sessions-fail-abandoned-turns": {
            "task": "sessions_app.tasks.fail_abandoned_turns",
            "schedule": float(TESS_SWEEP_INTERVAL_SECONDS),
        },
    }
)
# `make run` sets TESS_DEMO_SESSION=1: a "demo" tmux instance on a private socket under var/ whose command
# prints a line every second, a "demo-agent" one whose command works a few seconds, then asks
# "Continue? [y/N]" and waits for an answer, and a "demo-pi" pi instance with a sample session file
# (manage.py tess_demo_session binds all three for the demo operator).
TESS_DEMO_SESSION = env_bool("TESS_DEMO_SESSION", False)
DEMO_AGENT_SCRIPT = (
    "i=0; while :; do"
    ' for s in 1 2 3 4 5; do i=$((i+1)); echo "demo agent: working on step $i"; sleep 1; done;'
    " printf 'Continue? [y/N] '; read -r answer;"
    ' case "$answer" in [yY]*) echo "continuing";; *) echo "not confirmed: asking again after more work";; esac;'
    " done"
)
if TESS_DEMO_SESSION:
    TESS_RUNTIME_PROVIDERS.setdefault(
        "demo",
        {
            "kind": "tmux",
            "socket": "demo.sock",
            "command": ["sh", "-c", 'i=0; while :; do i=$((i+1)); echo "demo tick $i $(date -u +%T)"; sleep 1; done'],
        },
    )
    TESS_RUNTIME_PROVIDERS.setdefault(
        "demo-agent", {"kind": "tmux", "socket": "demo-agent.sock", "command": ["sh", "-c", DEMO_AGENT_SCRIPT]}
    )
    # A pi sessions directory under var/pi/demo holding a sample session file with usage entries, so the
    # board and the usage API have costs to show.
    TESS_RUNTIME_PROVIDERS.setdefault("demo-pi", {"kind": "pi", "sessions_dir": "demo"})

# --- operational memory plugin and reviewed coding memory (seeds 000 and 003) --------------------------
# Named adapter instances and the active one: {"active": "default", "instances": {"default": {"kind": "orm",
# "project_files": {"<tenant slug or *>": ["/path/runbook.md"]}, "startup": {"max_items": 8}}}}.
TESS_MEMORY_PLUGIN: dict[str, Any] = _json.loads(
    env_str("TESS_MEMORY_PLUGIN", "") or '{"active": "default", "instances": {"default": {"kind": "orm"}}}'
)
# How fresh a note's recorded last use is kept: recall rewrites it when it is older than this (seconds).
TESS_MEMORY_LAST_USE_SECONDS = env_int("TESS_MEMORY_LAST_USE_SECONDS", 60, minimum=0, maximum=86_400)
TESS_MEMORY_STARTUP_MAX_ITEMS = env_int("TESS_MEMORY_STARTUP_MAX_ITEMS", 8, minimum=1, maximum=50)
TESS_MEMORY_STARTUP_MAX_CHARS = env_int("TESS_MEMORY_STARTUP_MAX_CHARS", 4000, minimum=200, maximum=32000)
# Extra redaction patterns for captures, name → regex (JSON), on top of the built-in secret shapes.
TESS_MEMORY_REDACTION_PATTERNS: dict[str, str] = _json.loads(env_str("TESS_MEMORY_REDACTION_PATTERNS", "") or "{}")
# plast-mem (moeru-ai/plast-mem) for ingestion of exported coding memory and pre-retrieve; unset: off.
TESS_PLASTMEM_URL = env_str("TESS_PLASTMEM_URL", "") or ""
TESS_PLASTMEM_TIMEOUT = env_int("TESS_PLASTMEM_TIMEOUT", 5, minimum=1, maximum=60)
TESS_PLASTMEM_CONTEXT_MAX_ITEMS = env_int("TESS_PLASTMEM_CONTEXT_MAX_ITEMS", 10, minimum=1, maximum=100)
TESS_PLASTMEM_CONTEXT_MAX_CHARS = env_int("TESS_PLASTMEM_CONTEXT_MAX_CHARS", 2000, minimum=200, maximum=16000)
# Ingestion retries and exports whose wake-up was lost are sent by this sweep (the embedded pump runs it too).
CELERY_BEAT_SCHEDULE["coding-memory-requeue-due"] = {
    "task": "memory_app.coding.tasks.requeue_due_coding_exports",
    "schedule": 15.0,
}

# --- approvals ---------------------------------------------------------------------------
TESS_APPROVAL_TTL_MINUTES = env_int("TESS_APPROVAL_TTL_MINUTES", 15, minimum=1, maximum=7 * 24 * 60)
# Attempts on /approvals/<token>/ per person and per client address, e.g. "30/min".
TESS_APPROVAL_RATE = env_str("TESS_APPROVAL_RATE", "30/min") or "30/min"
# The public origin approval links in e-mails and direct messages start with.
TESS_PUBLIC_URL = env_str("TESS_PUBLIC_URL", "http://127.0.0.1:8000") or "http://127.0.0.1:8000"
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "tess@localhost") or "tess@localhost"

# --- inbox notifications (Web Push) ------------------------------------------------------
# The VAPID key pair (base64url: the raw 32-byte private key, the 65-byte uncompressed public key), made with
# `manage.py tess_vapid_keys`. Without them Web Push is off; the other channels still work.
TESS_VAPID_PUBLIC_KEY = env_str("TESS_VAPID_PUBLIC_KEY", "") or ""
TESS_VAPID_PRIVATE_KEY = env_str("TESS_VAPID_PRIVATE_KEY", "") or ""
# Who runs this server, for push services (RFC 8292 "sub"): a mailto: or https: URI.
TESS_VAPID_SUBJECT = env_str("TESS_VAPID_SUBJECT", f"mailto:{DEFAULT_FROM_EMAIL}") or f"mailto:{DEFAULT_FROM_EMAIL}"
TESS_WEBPUSH_TTL_SECONDS = env_int("TESS_WEBPUSH_TTL_SECONDS", 3600, minimum=0, maximum=28 * 24 * 3600)
# Accept push endpoints over plain http (a local push-service stand-in); browsers' push services are https.
TESS_WEBPUSH_ALLOW_HTTP = env_bool("TESS_WEBPUSH_ALLOW_HTTP", False)
CELERY_BEAT_SCHEDULE["approvals-requeue-due"] = {
    "task": "approvals_app.tasks.requeue_due_executions",
    "schedule": float(TESS_SWEEP_INTERVAL_SECONDS),
}
CELERY_BEAT_SCHEDULE["approvals-expire-lapsed"] = {
    "task": "approvals_app.tasks.expire_lapsed_approvals",
    "schedule": float(TESS_SWEEP_INTERVAL_SECONDS),
}

# --- gateway identity -----------------------------------------------------------------------
# Who this Tess is to its peers: TESS_INSTANCE_ID names it, TESS_GATEWAY_SIGNING_KEY signs its outgoing
# webhooks (the Mos webhook uses it unless TESS_MOS_WEBHOOK_SECRET is set). Production requires both.
TESS_INSTANCE_ID = instance_id(os.environ)
TESS_GATEWAY_SIGNING_KEY = gateway_signing_key(os.environ)

# --- Mos hand-offs (approvals_app.handoffs) ------------------------------------------------------------
# none: a hand-off is recorded and stays queued (the embedded default); redis: appended to a Redis stream,
# results read back through a consumer group; webhook: POSTed with an HMAC-SHA256 signature over the body,
# results come back signed to POST /api/v1/handoffs/<id>/result/.
TESS_MOS_ADAPTER = env_choice("TESS_MOS_ADAPTER", ("none", "redis", "webhook"), "none")
TESS_MOS_WEBHOOK_URL = env_str("TESS_MOS_WEBHOOK_URL", "") or ""
TESS_MOS_WEBHOOK_SECRET = mos_webhook_secret(os.environ)
TESS_MOS_WEBHOOK_TIMEOUT_SECONDS = env_int("TESS_MOS_WEBHOOK_TIMEOUT_SECONDS", 10, minimum=1, maximum=120)
TESS_MOS_HANDOFF_STREAM = env_str("TESS_MOS_HANDOFF_STREAM", "mos:handoffs") or "mos:handoffs"
TESS_MOS_RESULT_STREAM = env_str("TESS_MOS_RESULT_STREAM", "mos:results") or "mos:results"
TESS_MOS_RESULT_GROUP = env_str("TESS_MOS_RESULT_GROUP", "tess") or "tess"
if TESS_MOS_ADAPTER == "redis":
    CELERY_BEAT_SCHEDULE["handoffs-read-results"] = {
        "task": "approvals_app.handoffs.read_handoff_results",
        "schedule": 2.0,
    }
CELERY_BEAT_SCHEDULE["handoffs-requeue-due"] = {"task": "approvals_app.handoffs.requeue_due_handoffs", "schedule": 15.0}

# --- Discord (sessions_app.discord) ----------------------------------------------------------
INSTALLED_APPS += ["sessions_app.discord"]
# The API base Tess calls for follow-ups, channel notices and direct messages (a local stand-in in tests).
TESS_DISCORD_API_BASE = env_str("TESS_DISCORD_API_BASE", "https://discord.com/api/v10") or "https://discord.com/api/v10"
TESS_DISCORD_APPLICATION_ID = env_str("TESS_DISCORD_APPLICATION_ID", "") or ""
TESS_DISCORD_BOT_TOKEN = env_str("TESS_DISCORD_BOT_TOKEN", "") or ""  # or TESS_DISCORD_BOT_TOKEN_FILE
TESS_DISCORD_BOT_TOKEN_FILE = env_str("TESS_DISCORD_BOT_TOKEN_FILE", "") or ""
# On when any Discord key is configured, unless turned off; off also refuses every interaction.
# Production refuses Discord turned on without its public key, application id and bot token.
TESS_DISCORD_ENABLED = discord_enabled(os.environ)
TESS_DISCORD_PUBLIC_KEY = discord_public_key(os.environ)  # hex; empty: every interaction is refused
TESS_DISCORD_LINK_CODE_MINUTES = env_int("TESS_DISCORD_LINK_CODE_MINUTES", 10, minimum=1, maximum=60)
TESS_DISCORD_LINK_RATE = env_str("TESS_DISCORD_LINK_RATE", "10/hour") or "10/hour"
_THROTTLE_RATES: dict[str, str] = REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]  # type: ignore[assignment]
_THROTTLE_RATES["discord_link"] = TESS_DISCORD_LINK_RATE
TESS_DISCORD_RELAY_SECONDS = env_int("TESS_DISCORD_RELAY_SECONDS", 2, minimum=1, maximum=60)
# A deferred /tess ask's message is edited with the reply so far at most this often while the model writes it.
TESS_DISCORD_EDIT_SECONDS = env_int("TESS_DISCORD_EDIT_SECONDS", 1, minimum=1, maximum=30)
CELERY_BEAT_SCHEDULE["discord-relay"] = {
    "task": "sessions_app.discord.tasks.relay_discord_channels",
    "schedule": float(TESS_DISCORD_RELAY_SECONDS),
}

# --- metrics (tess_site/metrics.py, GET /metrics) -------------------------------------------------------
# Who may scrape /metrics: CIDRs matched against the peer address; everyone else gets 404, and so does any
# request that came through a proxy (X-Forwarded-For); TESS_METRICS=0 turns the endpoint off. Processes
# share their metrics through PROMETHEUS_MULTIPROC_DIR when it is set (see deploy/).
TESS_METRICS = env_bool("TESS_METRICS", True)
TESS_METRICS_ALLOWED_IPS = env_networks("TESS_METRICS_ALLOWED_IPS", ["127.0.0.1/32", "::1/128"])
# How often beat asks every runtime provider instance for its health (tess_provider_heartbeat_* metrics).
TESS_PROVIDER_HEARTBEAT_SECONDS = env_int("TESS_PROVIDER_HEARTBEAT_SECONDS", 30, minimum=5)
# After how long without a successful check an instance counts as down: health reports it unhealthy, its
# sessions' agent state reads unknown and sends to it fail fast (providers_app/heartbeat.py). Production
# refuses a value below two check intervals, which would flap on one slow check.
TESS_HEARTBEAT_STALE_SECONDS = env_int("TESS_HEARTBEAT_STALE_SECONDS", 3 * TESS_PROVIDER_HEARTBEAT_SECONDS, minimum=10)
CELERY_BEAT_SCHEDULE["providers-heartbeat"] = {
    "task": "providers_app.health.check_provider_heartbeats",
    "schedule": float(TESS_PROVIDER_HEARTBEAT_SECONDS),
}
