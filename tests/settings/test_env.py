"""Settings: strict environment helpers, and production refusing to start without what it needs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tess_site.settings.env import ImproperlyConfiguredEnv, env_bool, env_choice, env_int, env_list, env_str

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("true", True), ("On", True), ("0", False), ("no", False)])
def test_env_bool_reads_true_and_false(monkeypatch, raw, expected):
    monkeypatch.setenv("X_FLAG", raw)
    assert env_bool("X_FLAG", not expected) is expected


def test_env_bool_refuses_anything_else(monkeypatch):
    monkeypatch.setenv("X_FLAG", "ture")
    with pytest.raises(ImproperlyConfiguredEnv, match="neither true"):
        env_bool("X_FLAG", False)


def test_env_int_checks_type_and_bounds(monkeypatch):
    monkeypatch.setenv("X_N", "abc")
    with pytest.raises(ImproperlyConfiguredEnv):
        env_int("X_N", 1)
    monkeypatch.setenv("X_N", "0")
    with pytest.raises(ImproperlyConfiguredEnv, match="minimum"):
        env_int("X_N", 1, minimum=1)


def test_env_str_reads_a_secret_file_and_refuses_both(monkeypatch, tmp_path):
    secret = tmp_path / "key"
    secret.write_text("from-file\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env_str("X_SECRET") == "from-file"
    monkeypatch.setenv("X_SECRET", "direct")
    with pytest.raises(ImproperlyConfiguredEnv, match="both set"):
        env_str("X_SECRET")


def test_env_list_and_choice(monkeypatch):
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert env_list("X_LIST") == ["a", "b", "c"]
    monkeypatch.setenv("X_CHOICE", "maybe")
    with pytest.raises(ImproperlyConfiguredEnv, match="one of"):
        env_choice("X_CHOICE", ("yes", "no"), "no")


def _start_prod(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ALLOWED_HOSTS"}
    }
    clean.update(env, DJANGO_SETTINGS_MODULE="tess_site.settings.prod")
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_refuses_to_start_without_its_dependencies():
    result = _start_prod()
    assert result.returncode != 0
    for name in ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS"):
        assert name in result.stderr


def test_production_refuses_sqlite():
    result = _start_prod(
        SECRET_KEY="k" * 50,
        DATABASE_URL="sqlite:///tmp/x.db",
        REDIS_URL="redis://127.0.0.1:6379/0",
        ALLOWED_HOSTS="tess.example",
    )
    assert result.returncode != 0 and "PostgreSQL" in result.stderr


def test_production_starts_with_everything_and_debug_off():
    result = _start_prod(
        SECRET_KEY="k" * 50,
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/tess",
        REDIS_URL="redis://127.0.0.1:6379/0",
        ALLOWED_HOSTS="tess.example",
    )
    assert "refuses to start" not in result.stderr
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)",
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tess_site.settings.prod",
            "SECRET_KEY": "k" * 50,
            "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/tess",
            "REDIS_URL": "redis://127.0.0.1:6379/0",
            "ALLOWED_HOSTS": "tess.example",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.strip() == "False", probe.stderr
