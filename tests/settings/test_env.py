"""Settings: the strict environment helpers, secrets read from files included (production: test_prod.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tess_site.settings.env import (
    ImproperlyConfiguredEnv,
    env_bool,
    env_choice,
    env_int,
    env_list,
    env_networks,
    env_str,
)

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


def test_a_secret_file_loses_only_its_trailing_newline(monkeypatch, tmp_path):
    secret = tmp_path / "key"
    secret.write_bytes(b"  two words \r\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env_str("X_SECRET") == "  two words "


def test_a_missing_secret_file_is_an_error_naming_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "absent"))
    with pytest.raises(ImproperlyConfiguredEnv, match=r"X_SECRET_FILE=.*absent.* cannot be read: No such file"):
        env_str("X_SECRET")


def test_an_unreadable_secret_file_is_an_error_naming_the_variable(monkeypatch, tmp_path):
    # A directory cannot be read as a file, whoever runs the test (root reads any file regardless of mode).
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path))
    with pytest.raises(ImproperlyConfiguredEnv, match=r"X_SECRET_FILE=.* cannot be read"):
        env_str("X_SECRET")


def test_a_secret_file_that_is_not_text_is_refused_without_quoting_it(monkeypatch, tmp_path):
    secret = tmp_path / "key"
    secret.write_bytes(b"\xffsecret-bytes\xfe")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    with pytest.raises(ImproperlyConfiguredEnv) as refused:
        env_str("X_SECRET")
    assert "X_SECRET_FILE" in str(refused.value) and "not UTF-8" in str(refused.value)
    assert "secret-bytes" not in str(refused.value) and "0xff" not in str(refused.value)
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


def test_an_empty_secret_file_is_an_error(monkeypatch, tmp_path):
    secret = tmp_path / "key"
    secret.write_text("\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    with pytest.raises(ImproperlyConfiguredEnv, match=r"X_SECRET_FILE=.* is empty"):
        env_str("X_SECRET")


def test_env_networks_reads_cidrs_and_refuses_anything_else(monkeypatch):
    monkeypatch.setenv("X_NETS", "10.0.0.0/8, 192.0.2.7, ::1/128")
    assert env_networks("X_NETS", []) == ["10.0.0.0/8", "192.0.2.7/32", "::1/128"]
    monkeypatch.setenv("X_NETS", "10.0.0.0/8,localhost")
    with pytest.raises(ImproperlyConfiguredEnv, match="X_NETS: 'localhost' is not an IP network"):
        env_networks("X_NETS", [])


def test_env_list_and_choice(monkeypatch):
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert env_list("X_LIST") == ["a", "b", "c"]
    monkeypatch.setenv("X_CHOICE", "maybe")
    with pytest.raises(ImproperlyConfiguredEnv, match="one of"):
        env_choice("X_CHOICE", ("yes", "no"), "no")


def test_a_given_environment_is_read_instead_of_the_process_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("X_FLAG", "1")
    monkeypatch.setenv("X_N", "5")
    secret = tmp_path / "secret"
    secret.write_text("from-a-file\n")
    environ = {"X_FLAG": "off", "X_N": "7", "X_LIST": "a, b", "X_SECRET_FILE": str(secret)}
    assert env_bool("X_FLAG", True, environ=environ) is False
    assert env_int("X_N", 1, environ=environ) == 7
    assert env_list("X_LIST", environ=environ) == ["a", "b"]
    assert env_choice("X_MODE", ("a", "b"), "b", environ=environ) == "b"
    assert env_str("X_SECRET", environ=environ) == "from-a-file"
    assert env_str("X_FLAG", environ={}) is None  # an empty mapping is an environment too, not "use os.environ"
