"""MCP discovery against a real MCP server over stdio (tests/providers_app/mcp_server.py, made with the SDK)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from providers_app import mcp_discovery
from providers_app.mcp_discovery import McpDiscoveryFailed, McpServerUnknown, McpTimeout
from tests.conftest import Cast, scope_of

pytestmark = pytest.mark.django_db

SERVER = Path(__file__).with_name("mcp_server.py")


@pytest.fixture
def servers(settings) -> None:
    settings.TESS_MCP_SERVERS = {
        "local": {"argv": [sys.executable, str(SERVER)], "tenants": None},
        "acme-tools": {"argv": [sys.executable, str(SERVER)], "tenants": ["acme"]},
        "silent": {"argv": [sys.executable, "-c", "import time; time.sleep(60)"], "tenants": None},
        "missing": {"argv": ["/nonexistent/mcp-server-binary"], "tenants": None},
    }
    settings.TESS_MCP_TIMEOUT_SECONDS = 20


def test_discovery_lists_the_servers_tool_and_prompt(cast: Cast, servers: None):
    found = mcp_discovery.discover(scope_of(cast.owner, cast.acme), server="local")
    assert found["server"] == "local" and found["server_info"]["name"] == "tess-test-server"
    assert [t["name"] for t in found["tools"]] == ["add"]
    assert found["tools"][0]["description"] == "Add two integers."
    assert set(found["tools"][0]["input_schema"]["properties"]) == {"a", "b"}
    assert [p["name"] for p in found["prompts"]] == ["triage"]
    assert found["prompts"][0]["arguments"] == [{"name": "incident", "description": None, "required": True}]


def test_a_server_limited_to_another_tenant_does_not_exist_for_the_outsider(cast: Cast, servers: None):
    assert "acme-tools" not in mcp_discovery.servers(scope_of(cast.outsider, cast.globex))["servers"]
    with pytest.raises(McpServerUnknown):
        mcp_discovery.discover(scope_of(cast.outsider, cast.globex), server="acme-tools")


def test_a_server_that_never_answers_times_out_with_a_typed_error(cast: Cast, servers: None, settings):
    settings.TESS_MCP_TIMEOUT_SECONDS = 1
    with pytest.raises(McpTimeout) as raised:
        mcp_discovery.discover(scope_of(cast.owner, cast.acme), server="silent")
    assert raised.value.status_code == 504


def test_a_server_that_cannot_start_is_a_typed_failure(cast: Cast, servers: None):
    with pytest.raises(McpDiscoveryFailed):
        mcp_discovery.discover(scope_of(cast.owner, cast.acme), server="missing")
