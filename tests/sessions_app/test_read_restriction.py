"""Views and consumers read sessions, memory and tokens only through selectors, never through a manager.

A selector applies the tenant, owner and grant rules in one place; a query written in a view or consumer
would be a second copy of those rules, free to drift from the first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENTRY_MODULES = sorted(
    [
        *ROOT.glob("sessions_app/api/*views.py"),
        ROOT / "sessions_app/consumers.py",
        ROOT / "sessions_app/discord/views.py",
        ROOT / "memory_app/views.py",
        *ROOT.glob("memory_app/api/*views.py"),
    ]
)
MANAGERS = {"objects", "_default_manager", "_base_manager"}
FORBIDDEN_NAMES = {"PersonalToken", "get_user_model"}


def _offences(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr in MANAGERS:
            found.append(f"line {node.lineno}: .{node.attr}")
        if isinstance(node, ast.ImportFrom):
            found.extend(f"line {node.lineno}: imports {a.name}" for a in node.names if a.name in FORBIDDEN_NAMES)
    return found


def test_the_entry_modules_are_found() -> None:
    assert len(ENTRY_MODULES) >= 7
    assert all(path.exists() for path in ENTRY_MODULES)


@pytest.mark.parametrize("path", ENTRY_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_view_or_consumer_queries_no_model_directly(path: Path) -> None:
    assert _offences(path) == []
