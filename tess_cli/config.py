"""Where the CLI keeps its server URL and token: ``$XDG_CONFIG_HOME/tess/config.json`` (default
``~/.config/tess/config.json``), written with mode 0600. ``TESS_URL``/``TESS_TOKEN`` override it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8000"


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tess" / "config.json"


@dataclass
class Config:
    url: str = DEFAULT_URL
    token: str = ""
    tenant: str = ""
    username: str = ""


def load() -> Config:
    path = config_path()
    data: dict[str, str] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text())
            data = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            data = {}
    config = Config(
        url=str(data.get("url") or DEFAULT_URL),
        token=str(data.get("token") or ""),
        tenant=str(data.get("tenant") or ""),
        username=str(data.get("username") or ""),
    )
    config.url = os.environ.get("TESS_URL") or config.url
    config.token = os.environ.get("TESS_TOKEN") or config.token
    return config


def save(config: Config) -> Path:
    """Write the config so only its owner can read it (the token is a credential)."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(
            {"url": config.url, "token": config.token, "tenant": config.tenant, "username": config.username},
            handle,
            indent=2,
        )
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path
