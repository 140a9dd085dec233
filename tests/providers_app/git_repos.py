"""Real git repositories in temporary directories for the GitOps tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

ENV_ARGS = ("-c", "user.name=Test Author", "-c", "user.email=author@example.test", "-c", "init.defaultBranch=main")


def git(path: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(path), *ENV_ARGS, *args], capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout.strip()


def make_repo(path: Path, commits: int = 3) -> Path:
    """A repository on ``main`` with ``commits`` commits, one file each."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    for number in range(1, commits + 1):
        (path / f"file{number}.txt").write_text(f"content {number}\n")
        git(path, "add", f"file{number}.txt")
        git(path, "commit", "-q", "-m", f"commit number {number}")
    return path


def ref(path: Path, name: str) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--verify", "--quiet", name], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() if done.returncode == 0 else None
