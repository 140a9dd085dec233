"""Strict readers for the operator-tool settings: named git repositories, bootstrap commands, MCP servers.

Each is a JSON object in one environment variable, name → configuration. Names are short identifiers (a
client picks one; it never supplies a path or a command), and anything malformed stops start-up with a
message naming the variable, like the other helpers in ``env``.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any

from .env import ImproperlyConfiguredEnv, env_str

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_ARGS = 64
MAX_ARG_CHARS = 4096


def _object(name: str) -> dict[str, Any]:
    raw = env_str(name)
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfiguredEnv(f"{name} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ImproperlyConfiguredEnv(f"{name} must be a JSON object of name → configuration")
    for key in value:
        if not NAME.match(key):
            raise ImproperlyConfiguredEnv(f"{name}: {key!r} is not a name (letters, digits, '.', '_', '-'; ≤ 64)")
    return value


def _tenants(name: str, key: str, config: dict[str, Any]) -> list[str] | None:
    tenants = config.get("tenants")
    if tenants is None:
        return None
    if not isinstance(tenants, list) or not all(isinstance(t, str) and t for t in tenants):
        raise ImproperlyConfiguredEnv(f"{name}[{key!r}]['tenants'] must be a list of tenant slugs")
    return list(tenants)


def _keys(name: str, key: str, config: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise ImproperlyConfiguredEnv(f"{name}[{key!r}] has unknown keys: {', '.join(unknown)}")


def argv_of(name: str, key: str, value: Any) -> list[str]:
    """A non-empty list of strings, run as is (never through a shell by Tess)."""
    if not isinstance(value, list) or not value or len(value) > MAX_ARGS:
        raise ImproperlyConfiguredEnv(f"{name}[{key!r}] needs a non-empty argv list of at most {MAX_ARGS} strings")
    for arg in value:
        if not isinstance(arg, str) or "\x00" in arg or len(arg) > MAX_ARG_CHARS:
            raise ImproperlyConfiguredEnv(f"{name}[{key!r}]: every argv item must be a string without NUL bytes")
    if not value[0]:
        raise ImproperlyConfiguredEnv(f"{name}[{key!r}]: the program (argv[0]) is empty")
    return list(value)


def env_git_repos(name: str) -> dict[str, dict[str, Any]]:
    """``{"repo": "/abs/path"}`` or ``{"repo": {"path": "/abs/path", "tenants": ["acme"]}}``."""
    repos: dict[str, dict[str, Any]] = {}
    for key, value in _object(name).items():
        config = {"path": value} if isinstance(value, str) else value
        if not isinstance(config, dict):
            raise ImproperlyConfiguredEnv(f"{name}[{key!r}] must be a path or an object with 'path'")
        _keys(name, key, config, {"path", "tenants"})
        path = config.get("path")
        if not isinstance(path, str) or not PurePosixPath(path).is_absolute() or "\x00" in path:
            raise ImproperlyConfiguredEnv(f"{name}[{key!r}]['path'] must be an absolute path")
        repos[key] = {"path": path, "tenants": _tenants(name, key, config)}
    return repos


def env_bootstrap_commands(name: str) -> dict[str, dict[str, Any]]:
    """``{"name": {"provider": "<tmux instance>", "argv": ["prog", "arg"], "tenants": [...]}}``."""
    commands: dict[str, dict[str, Any]] = {}
    for key, config in _object(name).items():
        if not isinstance(config, dict):
            raise ImproperlyConfiguredEnv(f"{name}[{key!r}] must be an object with 'provider' and 'argv'")
        _keys(name, key, config, {"provider", "argv", "tenants"})
        provider = config.get("provider")
        if not isinstance(provider, str) or not NAME.match(provider):
            raise ImproperlyConfiguredEnv(f"{name}[{key!r}]['provider'] must name a runtime provider instance")
        commands[key] = {
            "provider": provider,
            "argv": argv_of(name, key, config.get("argv")),
            "tenants": _tenants(name, key, config),
        }
    return commands


def env_mcp_servers(name: str) -> dict[str, dict[str, Any]]:
    """``{"name": ["prog", "arg"]}`` or ``{"name": {"argv": [...], "tenants": [...]}}`` (stdio servers)."""
    servers: dict[str, dict[str, Any]] = {}
    for key, value in _object(name).items():
        config = {"argv": value} if isinstance(value, list) else value
        if not isinstance(config, dict):
            raise ImproperlyConfiguredEnv(f"{name}[{key!r}] must be an argv list or an object with 'argv'")
        _keys(name, key, config, {"argv", "tenants"})
        servers[key] = {"argv": argv_of(name, key, config.get("argv")), "tenants": _tenants(name, key, config)}
    return servers
