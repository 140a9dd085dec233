"""Settings whose value follows from several variables, as functions of an environment.

``base`` calls each with ``os.environ``; the production rules (``production``) call them with the environment
they check, so both read the same value the same way.
"""

from __future__ import annotations

import re

from .env import Environ, ImproperlyConfiguredEnv, env_bool, env_choice, env_str

# deterministic: the embedded default, answers from live state with no model; openai_compatible: the openai
# client against any chat-completions base URL. The earlier names builtin/openai are still accepted.
_ADAPTER_ALIASES = {"builtin": "deterministic", "openai": "openai_compatible"}


def model_adapter(environ: Environ) -> str:
    adapter = env_choice(
        "TESS_MODEL_ADAPTER", ("deterministic", "openai_compatible", *_ADAPTER_ALIASES), "deterministic", environ=environ
    )
    return _ADAPTER_ALIASES.get(adapter, adapter)


def model_name(environ: Environ) -> str | None:
    default = "gpt-5.6-sol" if model_adapter(environ) == "openai_compatible" else "tess-deterministic"
    return env_str("TESS_MODEL", default, environ=environ)


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
