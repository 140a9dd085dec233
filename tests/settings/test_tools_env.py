"""The operator-tool settings are read strictly: a malformed value stops start-up naming the variable."""

from __future__ import annotations

import pytest

from tess_site.settings.env import ImproperlyConfiguredEnv
from tess_site.settings.tools_env import env_bootstrap_commands, env_git_repos, env_mcp_servers


def test_unset_means_off(monkeypatch):
    for name in ("X_REPOS", "X_COMMANDS", "X_MCP"):
        monkeypatch.delenv(name, raising=False)
    assert (
        env_git_repos("X_REPOS") == {} and env_bootstrap_commands("X_COMMANDS") == {} and env_mcp_servers("X_MCP") == {}
    )


def test_the_short_and_long_forms_are_read(monkeypatch):
    monkeypatch.setenv("X_REPOS", '{"app": "/srv/app", "ops": {"path": "/srv/ops", "tenants": ["acme"]}}')
    assert env_git_repos("X_REPOS") == {
        "app": {"path": "/srv/app", "tenants": None},
        "ops": {"path": "/srv/ops", "tenants": ["acme"]},
    }
    monkeypatch.setenv("X_MCP", '{"files": ["npx", "server"]}')
    assert env_mcp_servers("X_MCP") == {"files": {"argv": ["npx", "server"], "tenants": None}}
    monkeypatch.setenv("X_COMMANDS", '{"shell": {"provider": "local", "argv": ["bash", "-l"]}}')
    assert env_bootstrap_commands("X_COMMANDS") == {
        "shell": {"provider": "local", "argv": ["bash", "-l"], "tenants": None}
    }


@pytest.mark.parametrize(
    ("reader", "raw"),
    [
        (env_git_repos, "not json"),
        (env_git_repos, '["/srv/app"]'),
        (env_git_repos, '{"app": "relative/path"}'),
        (env_git_repos, '{"-app": "/srv/app"}'),
        (env_git_repos, '{"app": {"path": "/srv/app", "branch": "main"}}'),
        (env_git_repos, '{"app": {"path": "/srv/app", "tenants": "acme"}}'),
        (env_bootstrap_commands, '{"shell": ["bash"]}'),
        (env_bootstrap_commands, '{"shell": {"provider": "local", "argv": []}}'),
        (env_bootstrap_commands, '{"shell": {"argv": ["bash"]}}'),
        (env_bootstrap_commands, '{"shell": {"provider": "local", "argv": "bash -l"}}'),
        (env_mcp_servers, '{"files": []}'),
        (env_mcp_servers, '{"files": [""]}'),
        (env_mcp_servers, '{"files": ["npx", 3]}'),
    ],
)
def test_malformed_values_stop_start_up_naming_the_variable(monkeypatch, reader, raw):
    monkeypatch.setenv("X_TOOLS", raw)
    with pytest.raises(ImproperlyConfiguredEnv, match="X_TOOLS"):
        reader("X_TOOLS")
