"""GitOps over configured local git repositories: read status, log and branches; create a branch or a tag.

Repositories are named in ``TESS_GITOPS_REPOS`` (a client picks a name, never a path); one with
``tenants`` exists only for those tenants. Every call is ``git -C <path>`` with a timeout
(``TESS_GITOPS_TIMEOUT_SECONDS``), no terminal prompt, no pager, and the repository's hooks switched off.
Names a client supplies are checked before git sees them: a ref never starts with ``-`` and must pass
``git check-ref-format``; revisions are ref-like names or hexadecimal ids, resolved with
``--end-of-options``, so nothing a client types can become an option.

Writes (create a branch, create a tag) happen only after a human approved them (``gitops_approvals``): the
approval pins the exact commit, and ``git update-ref <ref> <commit> ""`` creates the ref only if it does
not exist yet, so an execution repeated after a lost commit cannot move a ref.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

from django.conf import settings
from rest_framework import status as http

from tess_site.errors import Conflict, InvalidInput, NotFound
from tess_site.scope import Scope

from .contract import ProviderError, ProviderUnavailable

LOG_MAX = 100
BRANCHES_MAX = 200
STATUS_ENTRIES_MAX = 100
_REVISION = re.compile(r"^(?:[0-9a-fA-F]{7,64}|[A-Za-z0-9_][A-Za-z0-9._/+-]{0,199})$")
_HEX = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
ZERO = ""  # update-ref's "must not exist yet"


class GitRepoUnknown(NotFound):
    code = "git_repo_unknown"
    default_message = "No configured git repository has that name."


class GitRefInvalid(InvalidInput):
    code = "git_ref_invalid"
    default_message = "That is not a valid branch or tag name."


class GitRevisionUnknown(NotFound):
    code = "git_revision_unknown"
    default_message = "The repository has no commit by that name."


class GitRefExists(Conflict):
    code = "git_ref_exists"
    default_message = "That branch or tag already exists; nothing was changed."


class GitOpsFailed(ProviderError):
    code = "gitops_failed"
    status_code = http.HTTP_502_BAD_GATEWAY
    default_message = "git failed on the configured repository."


class GitOpsTimeout(ProviderUnavailable):
    code = "gitops_timeout"
    default_message = "git did not answer in time; try again shortly."


# --- configuration ---------------------------------------------------------------------------------------


def configured_repos() -> dict[str, dict[str, Any]]:
    return dict(getattr(settings, "TESS_GITOPS_REPOS", {}) or {})


def repos_for_tenant(slug: str) -> list[str]:
    return [
        name
        for name, config in sorted(configured_repos().items())
        if config.get("tenants") is None or slug in config["tenants"]
    ]


def repo_path(scope: Scope, repo: object) -> Path:
    """The path of ``repo`` if the scope's tenant may use it; ``git_repo_unknown`` (404) otherwise."""
    name = str(repo)
    config = configured_repos().get(name)
    if config is None or name not in repos_for_tenant(scope.tenant.slug):
        raise GitRepoUnknown(details={"repo": name[:64]})
    return Path(config["path"])


# --- running git -----------------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    keep = {key: os.environ[key] for key in ("PATH", "HOME", "LANG") if key in os.environ}
    return {**keep, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "GIT_OPTIONAL_LOCKS": "0"}


def git(path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``git -C path args`` with the configured timeout; ``GitOpsFailed`` on a failure when ``check``."""
    command = ["git", "-C", str(path), "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", *args]
    try:
        completed = subprocess.run(  # noqa: S603  (a fixed program; arguments are validated names)
            command,
            capture_output=True,
            text=True,
            timeout=settings.TESS_GITOPS_TIMEOUT_SECONDS,
            env=_env(),
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise GitOpsTimeout(details={"operation": args[0]}) from exc
    except OSError as exc:
        raise GitOpsFailed("git could not be run.", details={"operation": args[0]}) from exc
    if check and completed.returncode != 0:
        raise GitOpsFailed(details={"operation": args[0], "exit_code": completed.returncode})
    return completed


def _check_repository(path: Path) -> None:
    if not path.is_dir():
        raise GitOpsFailed("The configured repository path is not a directory.")
    probe = git(path, "rev-parse", "--is-inside-work-tree", "--is-bare-repository", check=False)
    if probe.returncode != 0:
        raise GitOpsFailed("The configured path is not a git repository.")


# --- names -----------------------------------------------------------------------------------------------


def check_new_ref(path: Path, name: object, *, namespace: str) -> str:
    """``refs/<namespace>/<name>`` after checking ``name``; ``git_ref_invalid`` (400) otherwise."""
    if not isinstance(name, str) or not name or len(name) > 200:
        raise GitRefInvalid(details={"field": namespace})
    if name.startswith("-") or name == "HEAD" or name.startswith("refs/") or not name.isprintable():
        raise GitRefInvalid(details={"field": namespace})
    full = f"refs/{namespace}/{name}"
    if git(path, "check-ref-format", full, check=False).returncode != 0:
        raise GitRefInvalid(details={"field": namespace})
    return full


def resolve_commit(path: Path, revision: object) -> str:
    """The full commit id ``revision`` names (a ref-like name or a hexadecimal id)."""
    if not isinstance(revision, str) or not _REVISION.match(revision) or ".." in revision:
        raise GitRefInvalid("That is not a revision Tess accepts (a branch, tag or commit id).")
    found = git(path, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}", check=False)
    commit = found.stdout.strip()
    if found.returncode != 0 or not _HEX.match(commit):
        raise GitRevisionUnknown()
    return commit


def ref_commit(path: Path, full_ref: str) -> str | None:
    found = git(path, "rev-parse", "--verify", "--quiet", "--end-of-options", full_ref, check=False)
    return found.stdout.strip() if found.returncode == 0 else None


# --- reads -----------------------------------------------------------------------------------------------


def repos(scope: Scope, **_: Any) -> dict[str, Any]:
    return {"repos": repos_for_tenant(scope.tenant.slug)}


def status(scope: Scope, *, repo: str) -> dict[str, Any]:
    """Branch, head commit, upstream distance and counts of changed paths (and at most 100 of them)."""
    path = repo_path(scope, repo)
    _check_repository(path)
    out = git(path, "status", "--porcelain=v2", "--branch", "--untracked-files=normal", "-z").stdout
    result: dict[str, Any] = {
        "repo": repo,
        "branch": None,
        "head": None,
        "upstream": None,
        "ahead": None,
        "behind": None,
        "staged": 0,
        "unstaged": 0,
        "untracked": 0,
        "conflicted": 0,
        "entries": [],
    }
    records = out.split("\0")
    skip_next = False
    for record in records:
        if skip_next:  # a rename's original path follows it as a record of its own
            skip_next = False
            continue
        if not record:
            continue
        _status_record(record, result)
        skip_next = record.startswith("2 ")
    result["clean"] = not (result["staged"] or result["unstaged"] or result["untracked"] or result["conflicted"])
    return result


def _status_record(record: str, result: dict[str, Any]) -> None:
    if record.startswith("# branch.oid "):
        oid = record.removeprefix("# branch.oid ")
        result["head"] = None if oid == "(initial)" else oid
    elif record.startswith("# branch.head "):
        head = record.removeprefix("# branch.head ")
        result["branch"] = None if head == "(detached)" else head
    elif record.startswith("# branch.upstream "):
        result["upstream"] = record.removeprefix("# branch.upstream ")
    elif record.startswith("# branch.ab "):
        ahead, behind = record.removeprefix("# branch.ab ").split()
        result["ahead"], result["behind"] = int(ahead), abs(int(behind))
    elif record[:2] in ("1 ", "2 "):
        xy = record[2:4]
        result["staged"] += xy[0] != "."
        result["unstaged"] += xy[1] != "."
        fields = 9 if record[0] == "1" else 10
        _entry(result, xy, record.split(" ", fields - 1)[-1])
    elif record.startswith("u "):
        result["conflicted"] += 1
        _entry(result, "UU", record.split(" ", 10)[-1])
    elif record.startswith("? "):
        result["untracked"] += 1
        _entry(result, "??", record[2:])


def _entry(result: dict[str, Any], xy: str, path: str) -> None:
    if len(result["entries"]) < STATUS_ENTRIES_MAX:
        result["entries"].append({"status": xy, "path": path})


def log(scope: Scope, *, repo: str, ref: str | None = None, limit: int = 20) -> dict[str, Any]:
    """At most ``limit`` (≤ 100) commits reachable from ``ref`` (default: HEAD), newest first."""
    path = repo_path(scope, repo)
    _check_repository(path)
    count = max(1, min(int(limit), LOG_MAX))
    start = resolve_commit(path, ref or "HEAD")
    out = git(path, "log", f"--max-count={count}", "--format=%H%x1f%an%x1f%aI%x1f%s%x1e", start, "--").stdout
    commits = []
    for raw in out.split("\x1e"):
        line = raw.strip("\n")
        if not line:
            continue
        parts = line.split("\x1f")
        if len(parts) != 4:
            continue
        sha, author, date, subject = parts
        commits.append({"commit": sha, "author": author, "date": date, "subject": subject[:300]})
    return {"repo": repo, "ref": ref or "HEAD", "commits": commits}


def branches(scope: Scope, *, repo: str) -> dict[str, Any]:
    """Local branches (at most 200) with their commits, and the checked-out one."""
    path = repo_path(scope, repo)
    _check_repository(path)
    out = git(
        path,
        "for-each-ref",
        f"--count={BRANCHES_MAX + 1}",
        "--sort=refname",
        "--format=%(refname:strip=2)%00%(objectname)%00%(HEAD)",
        "refs/heads/",
    ).stdout
    rows = [line.split("\0") for line in out.splitlines() if line]
    found = [{"name": name, "commit": commit, "current": head == "*"} for name, commit, head in rows[:BRANCHES_MAX]]
    current = next((row["name"] for row in found if row["current"]), None)
    return {"repo": repo, "branches": found, "current": current, "truncated": len(rows) > BRANCHES_MAX}


# --- writes (after approval only) -----------------------------------------------------------------------


def write_parameters(scope: Scope, *, repo: str, kind: str, name: str, start: str | None) -> dict[str, Any]:
    """What an approval of creating branch/tag ``name`` pins: the repository, the full ref and the commit.

    Refuses (typed) a name git would not accept, an unknown start, and a ref that already exists.
    """
    path = repo_path(scope, repo)
    _check_repository(path)
    namespace = "heads" if kind == "branch" else "tags"
    full = check_new_ref(path, name, namespace=namespace)
    commit = resolve_commit(path, start or "HEAD")
    if ref_commit(path, full) is not None:
        raise GitRefExists(details={"repo": repo})
    return {"repo": repo, kind: name, "ref": full, "from": start or "HEAD", "commit": commit}


def create_ref(scope: Scope, *, repo: str, full_ref: str, commit: str, reason: str) -> dict[str, Any]:
    """Create ``full_ref`` at ``commit`` only if it does not exist; a repeat at the same commit is a no-op."""
    path = repo_path(scope, repo)
    _check_repository(path)
    if not full_ref.startswith(("refs/heads/", "refs/tags/")) or not _HEX.match(commit):
        raise GitRefInvalid()
    check_new_ref(path, full_ref.split("/", 2)[2], namespace=full_ref.split("/")[1])
    made = git(path, "update-ref", "-m", reason, "--", full_ref, commit, ZERO, check=False)
    if made.returncode != 0:
        existing = ref_commit(path, full_ref)
        if existing != commit:
            raise GitRefExists(details={"repo": repo})
        return {"repo": repo, "ref": full_ref, "commit": commit, "created": False}
    return {"repo": repo, "ref": full_ref, "commit": commit, "created": True}
