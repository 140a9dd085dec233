"""The operator-tool catalog (seed 000, TESS-PLG-001): what an operator may ask Tess to do, described.

Each entry says who holds the authority (``tess`` runs it now, read-only; ``human_approval`` asks an
approver first; ``mos`` hands it to Mos), which capability and operation it needs, whether it only reads,
and the JSON Schema its input must satisfy. Entries are descriptions only: they never call a transport.
Invoking one is the gateway's job (``sessions_app.gateway_tools``): validate the input here, apply the
authority, then call the capability's operation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from jsonschema import Draft202012Validator
from rest_framework import status as http

from tess_site.errors import NotFound, TessError
from tess_site.scope import Scope
from tess_site.tool_policy import tool_policy_allows, tool_policy_check

from .bootstrap import commands_for_tenant, configured_commands
from .capabilities import OPERATIONS, CapabilityName, capability
from .contract import CapabilityUnsupported
from .gitops import repos_for_tenant
from .mcp_discovery import servers_for_tenant

MAX_ERRORS = 10


class Authority(StrEnum):
    TESS = "tess"
    MOS = "mos"
    HUMAN_APPROVAL = "human_approval"


class Family(StrEnum):
    GITOPS = "gitops"
    DIAGNOSTICS = "fleet_diagnostics"
    BOOTSTRAP = "runtime_bootstrap"
    DISCORD = "discord"
    MCP = "mcp_discovery"


class CatalogToolUnknown(NotFound):
    code = "catalog_tool_unknown"
    default_message = "The catalog has no tool with that id."


class CatalogInputInvalid(TessError):
    code = "catalog_input_invalid"
    status_code = http.HTTP_400_BAD_REQUEST
    default_message = "The tool's input does not match its schema."


@dataclass(frozen=True)
class CatalogEntry:
    """One operator tool. ``target_type``/``target_field`` name what an approval of it is about."""

    id: str
    family: Family
    title: str
    description: str
    authority: Authority
    input_schema: Mapping[str, Any]
    capability: CapabilityName
    operation: str
    target_type: str = ""
    target_field: str = ""

    def __post_init__(self) -> None:
        Draft202012Validator.check_schema(dict(self.input_schema))
        if OPERATIONS[self.capability].get(self.operation) is None:
            raise ValueError(f"{self.id}: {self.capability} has no operation {self.operation!r}")
        if self.authority is Authority.TESS and not self.read_only:
            raise ValueError(f"{self.id}: Tess runs only read-only tools on its own authority")
        if self.authority is Authority.HUMAN_APPROVAL and not (self.target_type and self.target_field):
            raise ValueError(f"{self.id}: an approval needs a target")

    @property
    def read_only(self) -> bool:
        """Whether the tool only reads: the capability operation's own flag (``capabilities.OPERATIONS``)."""
        return OPERATIONS[self.capability][self.operation]

    @property
    def action(self) -> str:
        """The approval action of a ``human_approval`` tool (its id: ``gitops.create_branch``)."""
        return self.id

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "family": str(self.family),
            "title": self.title,
            "description": self.description,
            "authority": str(self.authority),
            "input_schema": self.input_schema,
            "read_only": self.read_only,
            "capability": str(self.capability),
            "operation": self.operation,
        }


_NAME = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"}
_REF = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[^-]"}


def _schema(properties: dict[str, Any] | None = None, required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties or {},
        "required": list(required),
        "additionalProperties": False,
    }


ENTRIES: tuple[CatalogEntry, ...] = (
    CatalogEntry(
        id="gitops.repos",
        family=Family.GITOPS,
        title="Git repositories",
        description="The configured git repositories you may use.",
        authority=Authority.TESS,
        input_schema=_schema(),
        capability=CapabilityName.GITOPS,
        operation="repos",
    ),
    CatalogEntry(
        id="gitops.status",
        family=Family.GITOPS,
        title="Repository status",
        description="Branch, head commit, distance to upstream and changed paths of a configured repository.",
        authority=Authority.TESS,
        input_schema=_schema({"repo": _NAME}, ("repo",)),
        capability=CapabilityName.GITOPS,
        operation="status",
    ),
    CatalogEntry(
        id="gitops.log",
        family=Family.GITOPS,
        title="Recent commits",
        description="At most `limit` (1-100, default 20) commits reachable from `ref` (default HEAD).",
        authority=Authority.TESS,
        input_schema=_schema(
            {"repo": _NAME, "ref": _REF, "limit": {"type": "integer", "minimum": 1, "maximum": 100}}, ("repo",)
        ),
        capability=CapabilityName.GITOPS,
        operation="log",
    ),
    CatalogEntry(
        id="gitops.branches",
        family=Family.GITOPS,
        title="Branches",
        description="Local branches of a configured repository and the checked-out one.",
        authority=Authority.TESS,
        input_schema=_schema({"repo": _NAME}, ("repo",)),
        capability=CapabilityName.GITOPS,
        operation="branches",
    ),
    CatalogEntry(
        id="gitops.create_branch",
        family=Family.GITOPS,
        title="Create a branch",
        description="Create branch `branch` at `from` (default HEAD). An approver sees the exact commit and "
        "approves first; then it is created exactly once.",
        authority=Authority.HUMAN_APPROVAL,
        input_schema=_schema({"repo": _NAME, "branch": _REF, "from": _REF}, ("repo", "branch")),
        capability=CapabilityName.GITOPS,
        operation="create_branch",
        target_type="git_repo",
        target_field="repo",
    ),
    CatalogEntry(
        id="gitops.create_tag",
        family=Family.GITOPS,
        title="Create a tag",
        description="Create tag `tag` at `from` (default HEAD), after an approver approved the exact commit.",
        authority=Authority.HUMAN_APPROVAL,
        input_schema=_schema({"repo": _NAME, "tag": _REF, "from": _REF}, ("repo", "tag")),
        capability=CapabilityName.GITOPS,
        operation="create_tag",
        target_type="git_repo",
        target_field="repo",
    ),
    CatalogEntry(
        id="gitops.merge_request",
        family=Family.GITOPS,
        title="Ask Mos to merge",
        description="Merges are Mos's work: this hands Mos a request to merge `source` into `target`.",
        authority=Authority.MOS,
        input_schema=_schema({"repo": _NAME, "source": _REF, "target": _REF}, ("repo", "source", "target")),
        capability=CapabilityName.MOS_COORDINATION,
        operation="handoff",
    ),
    CatalogEntry(
        id="diagnostics.provider_health",
        family=Family.DIAGNOSTICS,
        title="Provider health",
        description="Health and heartbeat of each runtime provider instance, each check under a deadline.",
        authority=Authority.TESS,
        input_schema=_schema(),
        capability=CapabilityName.FLEET_DIAGNOSTICS,
        operation="provider_health",
    ),
    CatalogEntry(
        id="diagnostics.queue_depth",
        family=Family.DIAGNOSTICS,
        title="Queue depth",
        description="Open durable work of your tenant (inbox, outbox, approval executions, hand-offs), "
        "counted with a cap and a statement timeout.",
        authority=Authority.TESS,
        input_schema=_schema(),
        capability=CapabilityName.FLEET_DIAGNOSTICS,
        operation="queue_depth",
    ),
    CatalogEntry(
        id="diagnostics.session_counts",
        family=Family.DIAGNOSTICS,
        title="Session counts",
        description="Your tenant's sessions by status, counted with a cap and a statement timeout.",
        authority=Authority.TESS,
        input_schema=_schema(),
        capability=CapabilityName.FLEET_DIAGNOSTICS,
        operation="session_counts",
    ),
    CatalogEntry(
        id="bootstrap.start",
        family=Family.BOOTSTRAP,
        title="Start a runtime",
        description="Start configured command `command` in a new runtime session that becomes your Tess "
        "session, after an approver approved exactly that command.",
        authority=Authority.HUMAN_APPROVAL,
        input_schema=_schema(
            {"command": _NAME, "title": {"type": "string", "minLength": 1, "maxLength": 48}}, ("command",)
        ),
        capability=CapabilityName.RUNTIME_BOOTSTRAP,
        operation="start",
        target_type="runtime_command",
        target_field="command",
    ),
    CatalogEntry(
        id="discord.status",
        family=Family.DISCORD,
        title="Discord integration",
        description="Whether the Discord integration is configured, and your tenant's bound channels and "
        "linked identities (counts; never a key).",
        authority=Authority.TESS,
        input_schema=_schema(),
        capability=CapabilityName.DISCORD_INTEGRATION,
        operation="status",
    ),
    CatalogEntry(
        id="mcp.servers",
        family=Family.MCP,
        title="MCP servers",
        description="The configured MCP servers you may discover.",
        authority=Authority.TESS,
        input_schema=_schema(),
        capability=CapabilityName.MCP_DISCOVERY,
        operation="servers",
    ),
    CatalogEntry(
        id="mcp.discover",
        family=Family.MCP,
        title="Discover MCP tools and prompts",
        description="Connect to a configured MCP server over stdio and list its tools and prompts (nothing is called).",
        authority=Authority.TESS,
        input_schema=_schema({"server": _NAME}, ("server",)),
        capability=CapabilityName.MCP_DISCOVERY,
        operation="discover",
    ),
)

_BY_ID = {entry.id: entry for entry in ENTRIES}
_VALIDATORS = {entry.id: Draft202012Validator(dict(entry.input_schema)) for entry in ENTRIES}


def catalog_entries() -> tuple[CatalogEntry, ...]:
    return ENTRIES


def catalog_entry(tool_id: str) -> CatalogEntry:
    entry = _BY_ID.get(tool_id)
    if entry is None:
        raise CatalogToolUnknown(details={"tool": tool_id[:64]})
    return entry


def validate_input(entry: CatalogEntry, data: object) -> dict[str, Any]:
    """``data`` if it satisfies the entry's schema; ``catalog_input_invalid`` (400) naming each error's path."""
    errors = sorted(_VALIDATORS[entry.id].iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        found = [
            {"path": "/" + "/".join(str(part) for part in error.absolute_path), "message": error.message[:300]}
            for error in errors[:MAX_ERRORS]
        ]
        raise CatalogInputInvalid(
            f"The input of {entry.id} is not valid at {found[0]['path']}: {found[0]['message']}",
            details={"tool": entry.id, "path": found[0]["path"], "errors": found},
        )
    assert isinstance(data, dict)
    return dict(data)


# --- what a tenant sees ------------------------------------------------------------------------------


def entry_available(entry: CatalogEntry, scope: Scope) -> bool:
    """Whether the capability and operation the entry needs are on offer to the scope's tenant now."""
    try:
        if entry.capability is CapabilityName.RUNTIME_BOOTSTRAP:
            commands = configured_commands()
            return any(
                capability(entry.capability, instance=commands[name]["provider"]).supports(entry.operation)
                for name in commands_for_tenant(scope.tenant.slug)
            )
        return capability(entry.capability).supports(entry.operation)
    except CapabilityUnsupported:
        return False


def entry_policy_check(entry: CatalogEntry) -> None:
    """``tool_policy_refused`` (403) when ``TESS_TOOL_POLICY`` does not allow the entry's authority
    (``read_only``: only ``tess`` tools); checked before anything is requested or handed off."""
    tool_policy_check(authority=str(entry.authority), action=entry.id)


def choices_for(entry: CatalogEntry, scope: Scope) -> dict[str, list[str]]:
    """The names the tenant may pass in the entry's name fields (repositories, commands, servers)."""
    properties = entry.input_schema.get("properties", {})
    slug = scope.tenant.slug
    found: dict[str, list[str]] = {}
    if "repo" in properties:
        found["repo"] = repos_for_tenant(slug)
    if "command" in properties:
        found["command"] = commands_for_tenant(slug)
    if "server" in properties:
        found["server"] = servers_for_tenant(slug)
    return found


def catalog_for(scope: Scope) -> list[dict[str, Any]]:
    return [
        {
            **entry.describe(),
            "available": entry_available(entry, scope),
            "allowed_by_policy": tool_policy_allows(str(entry.authority)),
            "choices": choices_for(entry, scope),
        }
        for entry in ENTRIES
    ]
