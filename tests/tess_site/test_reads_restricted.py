"""Request-facing modules read approvals, cards, hand-offs and tokens only through their selectors.

A view, consumer, API or admin module of approvals_app or tess_site that wrote ``Approval.objects`` would
skip the tenant, owner and grant rules ``approvals_restrict`` and its siblings apply. This scans their
source, so a new module is covered the day it is added.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("approvals_app", "tess_site")
RESTRICTED_MODELS = {
    "Approval",
    "ApprovalLink",
    "Card",
    "Handoff",
    "PersonalToken",
    "PushSubscription",
    "InboxPreferences",
}
MANAGERS = {"objects", "_default_manager", "_base_manager"}


def _request_facing(path: Path) -> bool:
    parts = path.relative_to(ROOT).parts
    if "migrations" in parts or "settings" in parts:
        return False
    name = path.stem
    return (
        "api" in parts[:-1]
        or name in {"views", "consumers", "admin", "api", "ws", "health", "login"}
        or name.endswith(("_views", "_api", "_consumers"))
    )


def _modules() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py")) if _request_facing(path)]


def _manager_reads(source: str) -> list[tuple[int, str]]:
    """``(line, "Model.manager")`` for every ``Model.objects`` (or another manager) of a restricted model."""
    reads = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in MANAGERS
            and isinstance(node.value, ast.Name)
            and node.value.id in RESTRICTED_MODELS
        ):
            reads.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return reads


def test_the_scan_covers_the_request_facing_modules():
    names = {path.relative_to(ROOT).as_posix() for path in _modules()}
    assert {
        "approvals_app/views.py",
        "approvals_app/consumers.py",
        "approvals_app/admin.py",
        "approvals_app/api/approval_views.py",
        "approvals_app/api/card_views.py",
        "approvals_app/api/handoff_views.py",
        "tess_site/consumers.py",
        "tess_site/audit_api.py",
        "tess_site/accounts/admin.py",
        "tess_site/accounts/api/views.py",
    } <= names


def test_the_scan_finds_a_direct_read():
    source = "def f(scope):\n    return Card.objects.filter(owner=scope.actor)\n"
    assert _manager_reads(source) == [(2, "Card.objects")]
    assert _manager_reads("def f():\n    return Session.objects.all()\n") == []


@pytest.mark.parametrize("path", _modules(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_request_facing_modules_read_through_the_selectors(path: Path):
    assert _manager_reads(path.read_text()) == []
