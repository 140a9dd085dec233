"""Strict, typed readers for environment variables.

Every setting Tess reads from the environment goes through one of these helpers, so a malformed value
fails loudly at start-up instead of silently meaning something else (``TESS_DEBUG=ture`` is an error,
not ``False``). ``NAME_FILE`` is honoured for every string so secrets can come from mounted files.
Each reads ``os.environ`` unless given another ``environ``, so a rule over settings can be checked against
any environment without starting a process.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path


class ImproperlyConfiguredEnv(Exception):
    """An environment variable holds a value its reader cannot accept."""


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


Environ = Mapping[str, str]


def env_str(name: str, default: str | None = None, *, environ: Environ | None = None) -> str | None:
    """Return ``NAME``, or the contents of the file named by ``NAME_FILE``, or ``default``.

    Setting both is an error: nobody should have to guess which one wins.
    """
    source = os.environ if environ is None else environ
    direct = source.get(name)
    file_path = source.get(f"{name}_FILE")
    if direct is not None and file_path is not None:
        raise ImproperlyConfiguredEnv(f"{name} and {name}_FILE are both set; set only one")
    if file_path is not None:
        return _read_secret_file(name, file_path)
    if direct is None or direct == "":
        return default
    return direct


def _read_secret_file(name: str, file_path: str) -> str:
    """The file's text without its trailing newline. Errors name the variable and the path, never content.

    ``{name}_FILE`` is how secrets arrive under systemd (``LoadCredential=`` puts them in
    ``$CREDENTIALS_DIRECTORY``) and container runtimes (mounted secret files); ``echo`` and editors end a
    file with a newline that is not part of the secret.
    """
    try:
        raw = Path(file_path).read_bytes()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ImproperlyConfiguredEnv(f"{name}_FILE={file_path!r} cannot be read: {reason}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        # The decoder's message quotes the offending byte, which is part of the secret: say only what is wrong.
        raise ImproperlyConfiguredEnv(f"{name}_FILE={file_path!r} is not UTF-8 text") from None
    value = text.rstrip("\r\n")
    if not value:
        raise ImproperlyConfiguredEnv(f"{name}_FILE={file_path!r} is empty")
    return value


def env_bool(name: str, default: bool, *, environ: Environ | None = None) -> bool:
    raw = env_str(name, environ=environ)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfiguredEnv(f"{name}={raw!r} is neither true (1/true/yes/on) nor false (0/false/no/off)")


def env_int(
    name: str,
    default: int,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    environ: Environ | None = None,
) -> int:
    raw = env_str(name, environ=environ)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ImproperlyConfiguredEnv(f"{name}={raw!r} is not an integer") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfiguredEnv(f"{name}={value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfiguredEnv(f"{name}={value} is above the maximum {maximum}")
    return value


def env_list(name: str, default: list[str] | None = None, *, environ: Environ | None = None) -> list[str]:
    """A comma-separated list; blank items are dropped."""
    raw = env_str(name, environ=environ)
    if raw is None:
        return list(default or [])
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_networks(name: str, default: list[str]) -> list[str]:
    """A comma-separated list of IP networks in CIDR notation (a bare address is a one-address network)."""
    networks = []
    for item in env_list(name, default):
        try:
            networks.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError as exc:
            raise ImproperlyConfiguredEnv(f"{name}: {item!r} is not an IP network (CIDR)") from exc
    return networks


def env_choice(name: str, choices: tuple[str, ...], default: str, *, environ: Environ | None = None) -> str:
    raw = env_str(name, environ=environ)
    if raw is None:
        return default
    if raw not in choices:
        raise ImproperlyConfiguredEnv(f"{name}={raw!r} must be one of {', '.join(choices)}")
    return raw
