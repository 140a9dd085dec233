"""MCP/skill discovery: connect to a configured MCP server over stdio and list its tools and prompts.

Servers are named in ``TESS_MCP_SERVERS`` (name → argv; a client picks a name, never a command). Each
discovery starts the server as a child process with the MCP SDK's default environment (no Tess secrets),
runs the handshake, pages through ``tools/list`` and ``prompts/list`` (bounded), and stops the child; the
whole exchange has one deadline (``TESS_MCP_TIMEOUT_SECONDS``). Discovery only lists: no tool is called.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from typing import Any

import anyio
from django.conf import settings
from rest_framework import status as http

from tess_site.errors import NotFound
from tess_site.scope import Scope

from .contract import ProviderError

MAX_ITEMS = 200
MAX_PAGES = 10
MAX_TEXT = 1000


class McpServerUnknown(NotFound):
    code = "mcp_server_unknown"
    default_message = "No configured MCP server has that name."


class McpDiscoveryFailed(ProviderError):
    code = "mcp_discovery_failed"
    status_code = http.HTTP_502_BAD_GATEWAY
    default_message = "The MCP server could not be started or did not speak MCP."


class McpTimeout(ProviderError):
    code = "mcp_timeout"
    status_code = http.HTTP_504_GATEWAY_TIMEOUT
    default_message = "The MCP server did not answer in time."


def configured_servers() -> dict[str, dict[str, Any]]:
    return dict(getattr(settings, "TESS_MCP_SERVERS", {}) or {})


def servers_for_tenant(slug: str) -> list[str]:
    return [
        name
        for name, config in sorted(configured_servers().items())
        if config.get("tenants") is None or slug in config["tenants"]
    ]


def servers(scope: Scope, **_: Any) -> dict[str, Any]:
    return {"servers": servers_for_tenant(scope.tenant.slug)}


def discover(scope: Scope, *, server: str) -> dict[str, Any]:
    """The tools and prompts of configured server ``server`` (404 if the tenant has none by that name)."""
    config = configured_servers().get(server)
    if config is None or server not in servers_for_tenant(scope.tenant.slug):
        raise McpServerUnknown(details={"server": server[:64]})
    timeout = float(settings.TESS_MCP_TIMEOUT_SECONDS)
    # A fresh thread has no running event loop, whatever called us (a sync view under ASGI, a task, a test).
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tess-mcp") as pool:
        found = pool.submit(asyncio.run, _discover(list(config["argv"]), timeout)).result()
    return {"server": server, **found}


async def _discover(argv: list[str], timeout: float) -> dict[str, Any]:
    # Imported on use: the MCP SDK is an optional, heavy dependency only discovery needs.
    from mcp import Client, StdioServerParameters, stdio_client

    parameters = StdioServerParameters(command=argv[0], args=argv[1:])
    try:
        # The child's stderr goes nowhere rather than into Tess's own log stream.
        with open(os.devnull, "w") as errlog, anyio.fail_after(timeout):
            transport = stdio_client(parameters, errlog=errlog)
            async with Client(transport, read_timeout_seconds=timeout, cache=None) as client:
                tools = await _paged(client.list_tools, "tools")
                prompts = await _paged(client.list_prompts, "prompts")
                info = client.server_info
    except TimeoutError as exc:
        raise McpTimeout() from exc
    except OSError as exc:
        raise McpDiscoveryFailed("The MCP server could not be started.") from exc
    except Exception as exc:  # the SDK's protocol errors, a child that exited: a typed failure, not a 500
        raise McpDiscoveryFailed(details={"error": type(exc).__name__}) from exc
    return {
        "server_info": {"name": info.name, "version": info.version} if info is not None else None,
        "tools": [_tool(tool) for tool in tools],
        "prompts": [_prompt(prompt) for prompt in prompts],
    }


async def _paged(fetch: Any, field: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await fetch(cursor=cursor)
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor or len(items) >= MAX_ITEMS:
            break
    return items[:MAX_ITEMS]


def _text(value: str | None) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) else None


def _tool(tool: Any) -> dict[str, Any]:
    return {
        "name": tool.name,
        "title": _text(getattr(tool, "title", None)),
        "description": _text(tool.description),
        "input_schema": tool.input_schema,
    }


def _prompt(prompt: Any) -> dict[str, Any]:
    return {
        "name": prompt.name,
        "title": _text(getattr(prompt, "title", None)),
        "description": _text(prompt.description),
        "arguments": [
            {"name": arg.name, "description": _text(arg.description), "required": bool(arg.required)}
            for arg in (prompt.arguments or [])
        ],
    }
