"""``TESS_TOOL_POLICY``: which authorities Tess may act under when an operator asks it to do something.

The catalog (``providers_app.catalog``) and the gateway (``sessions_app``) enforce it; health reports the
policy and what it lets through. ``read_only`` lets Tess run only what it runs on its own authority (the
read-only tools); ``approval_required`` adds actions that wait for a human approver and hand-offs to Mos.
Authorities are the catalog's (``tess``, ``human_approval``, ``mos``).
"""

from __future__ import annotations

from django.conf import settings

from .errors import ToolPolicyRefused

AUTHORITIES = ("tess", "human_approval", "mos")
POLICIES: dict[str, tuple[str, ...]] = {
    "read_only": ("tess",),
    "approval_required": AUTHORITIES,
}


def tool_policy() -> str:
    return str(settings.TESS_TOOL_POLICY)


def tool_policy_allows(authority: str) -> bool:
    return authority in POLICIES[tool_policy()]


def tool_policy_check(*, authority: str, action: str) -> None:
    """Raise ``tool_policy_refused`` (403) naming the policy when ``action`` needs ``authority`` and the policy
    does not allow it. Call it before anything is requested, handed off or written."""
    if tool_policy_allows(authority):
        return
    policy = tool_policy()
    raise ToolPolicyRefused(
        f"The tool policy is {policy}: Tess runs only read-only tools, so {action} ({authority}) was refused "
        "and nothing was requested.",
        details={"policy": policy, "authority": authority, "action": action},
    )


def tool_policy_report() -> dict[str, list[str]]:
    """What health shows beside the policy's name: the authorities it allows and refuses."""
    allowed = POLICIES[tool_policy()]
    return {
        "allows": list(allowed),
        "refuses": [authority for authority in AUTHORITIES if authority not in allowed],
    }
