"""GitOps reads and ref creation against real git repositories in temporary directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from providers_app import gitops
from providers_app.gitops import GitRefExists, GitRefInvalid, GitRepoUnknown, GitRevisionUnknown
from tests.conftest import Cast, scope_of
from tests.providers_app.git_repos import git, make_repo, ref

pytestmark = pytest.mark.django_db


@pytest.fixture
def repo(settings, tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "app")
    settings.TESS_GITOPS_REPOS = {
        "app": {"path": str(path), "tenants": None},
        "acme-only": {"path": str(path), "tenants": ["acme"]},
    }
    return path


def test_status_reports_the_branch_head_and_each_kind_of_change(cast: Cast, repo: Path):
    scope = scope_of(cast.owner, cast.acme)
    clean = gitops.status(scope, repo="app")
    assert clean["branch"] == "main" and clean["head"] == git(repo, "rev-parse", "HEAD") and clean["clean"] is True

    (repo / "file1.txt").write_text("changed\n")
    (repo / "file2.txt").write_text("staged\n")
    git(repo, "add", "file2.txt")
    (repo / "new.txt").write_text("untracked\n")
    dirty = gitops.status(scope, repo="app")
    assert (dirty["staged"], dirty["unstaged"], dirty["untracked"], dirty["clean"]) == (1, 1, 1, False)
    assert {e["path"] for e in dirty["entries"]} == {"file1.txt", "file2.txt", "new.txt"}


def test_log_is_newest_first_and_bounded(cast: Cast, repo: Path):
    found = gitops.log(scope_of(cast.owner, cast.acme), repo="app", limit=2)
    assert [c["subject"] for c in found["commits"]] == ["commit number 3", "commit number 2"]
    assert found["commits"][0]["author"] == "Test Author"
    assert len(gitops.log(scope_of(cast.owner, cast.acme), repo="app", limit=500)["commits"]) == 3


def test_branches_lists_local_branches_and_the_current_one(cast: Cast, repo: Path):
    git(repo, "branch", "feature/x")
    found = gitops.branches(scope_of(cast.owner, cast.acme), repo="app")
    assert [b["name"] for b in found["branches"]] == ["feature/x", "main"]
    assert found["current"] == "main" and found["truncated"] is False


def test_a_repository_limited_to_another_tenant_does_not_exist_for_the_outsider(cast: Cast, repo: Path):
    with pytest.raises(GitRepoUnknown):
        gitops.status(scope_of(cast.outsider, cast.globex), repo="acme-only")
    assert gitops.repos_for_tenant("globex") == ["app"]
    with pytest.raises(GitRepoUnknown):
        gitops.status(scope_of(cast.owner, cast.acme), repo="../etc")


@pytest.mark.parametrize("name", ["-evil", "--upload-pack=x", "a..b", "has space", "HEAD", "refs/heads/x", "x.lock"])
def test_ref_names_that_could_be_options_or_are_invalid_are_refused(cast: Cast, repo: Path, name: str):
    with pytest.raises(GitRefInvalid):
        gitops.write_parameters(scope_of(cast.owner, cast.acme), repo="app", kind="branch", name=name, start=None)


@pytest.mark.parametrize("revision", ["--all", "-n1", "main..HEAD", "HEAD@{1}"])
def test_revisions_that_could_be_options_are_refused(cast: Cast, repo: Path, revision: str):
    with pytest.raises(GitRefInvalid):
        gitops.log(scope_of(cast.owner, cast.acme), repo="app", ref=revision)


def test_an_unknown_revision_is_a_typed_404(cast: Cast, repo: Path):
    with pytest.raises(GitRevisionUnknown):
        gitops.log(scope_of(cast.owner, cast.acme), repo="app", ref="no-such-branch")


def test_write_parameters_pin_the_exact_commit_and_refuse_an_existing_ref(cast: Cast, repo: Path):
    scope = scope_of(cast.owner, cast.acme)
    first = git(repo, "rev-list", "--max-parents=0", "HEAD")
    pinned = gitops.write_parameters(scope, repo="app", kind="branch", name="release/1", start=first)
    assert pinned == {
        "repo": "app",
        "branch": "release/1",
        "ref": "refs/heads/release/1",
        "from": first,
        "commit": first,
    }
    with pytest.raises(GitRefExists):
        gitops.write_parameters(scope, repo="app", kind="branch", name="main", start=None)


def test_create_ref_creates_once_and_never_moves_an_existing_ref(cast: Cast, repo: Path):
    scope = scope_of(cast.owner, cast.acme)
    head = git(repo, "rev-parse", "HEAD")
    first = git(repo, "rev-list", "--max-parents=0", "HEAD")
    made = gitops.create_ref(scope, repo="app", full_ref="refs/tags/v1", commit=head, reason="test")
    assert made["created"] is True and ref(repo, "refs/tags/v1") == head
    again = gitops.create_ref(scope, repo="app", full_ref="refs/tags/v1", commit=head, reason="test")
    assert again["created"] is False
    with pytest.raises(GitRefExists):
        gitops.create_ref(scope, repo="app", full_ref="refs/tags/v1", commit=first, reason="test")
    assert ref(repo, "refs/tags/v1") == head
