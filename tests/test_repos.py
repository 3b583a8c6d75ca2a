"""Managed repositories against real git repositories in temporary directories."""

from __future__ import annotations

import base64
import os
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitkb.core.change_planning import changed_files, plan_changes
from gitkb.core.errors import Conflict, ForgeError, InvalidArgument, NotFound, StoreUnavailable, Unauthorized
from gitkb.stores import git_guard
from gitkb.stores.git_auth import ASKPASS_SCRIPT, GitCredentials, cli_auth_env, redact, write_askpass
from gitkb.stores.git_merge import merge_into
from gitkb.stores.repos import ManagedRepo
from helpers import WaitTimeout, wait_until

AUTHOR = ("Gitkb Test", "gitkb@example.com")
BRANCH = "gitkb/proposals/kb"


@pytest.fixture(autouse=True)
def git_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GITKB_WRITER_TOKEN", "GIT_ASKPASS"):
        monkeypatch.delenv(var, raising=False)
    env = {
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_ALLOW_PROTOCOL": "file",
        "GIT_AUTHOR_NAME": "Alice",
        "GIT_AUTHOR_EMAIL": "alice@example.com",
        "GIT_COMMITTER_NAME": "Alice",
        "GIT_COMMITTER_EMAIL": "alice@example.com",
        "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
        "GIT_TERMINAL_PROMPT": "0",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)


def git(cwd: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip() if check else proc.stdout + proc.stderr


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """An upstream working repository with docs in first-level folders, a symlink and a submodule entry."""
    w = tmp_path / "work"
    w.mkdir()
    git(w, "init", "-q", "-b", "main")
    write(w, "README.md", "# readme\n")
    write(w, "docs/kb-manifest.json", '{"title": "kb"}\n')
    write(w, "docs/edw/guide.md", "# Guide\n\nline one\nline two\n")
    write(w, "docs/edw/empty.md", "")
    write(w, "docs/ops/runbook.md", "# Runbook\n\nrestart the thing\n")
    write(w, "docs/ops/deep/nested/page.md", "deep\n")
    (w / "docs" / "outside").symlink_to("../..")
    git(w, "add", "-A")
    git(w, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},docs/vendor")
    git(w, "commit", "-q", "-m", "initial")
    return w


@pytest.fixture
def remote(tmp_path: Path, work: Path) -> Path:
    r = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(r))
    git(work, "remote", "add", "origin", str(r))
    return r


@pytest.fixture
def managed(tmp_path: Path, remote: Path) -> ManagedRepo:
    return ManagedRepo.clone(str(remote), tmp_path / "managed", branch="main")


def remote_sha(remote: Path, branch: str) -> str | None:
    out = git(remote, "for-each-ref", "--format=%(objectname)", f"refs/heads/{branch}")
    return out or None


def push_upstream(work: Path, msg: str, files: dict[str, str | None], *, force: bool = False) -> str:
    for rel, text in files.items():
        if text is None:
            (work / rel).unlink()
        else:
            write(work, rel, text)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", msg)
    git(work, "push", "-q", *(["--force"] if force else []), "origin", "HEAD:main")
    return git(work, "rev-parse", "HEAD")


# --------------------------------------------------------------------------- clone, fetch, read


def test_clone_is_bare_guarded_and_tracks_the_branch(managed: ManagedRepo, remote: Path) -> None:
    assert managed.repository.is_bare
    assert not (managed.path / "docs").exists()
    head = managed.tracking_head("main")
    assert head == remote_sha(remote, "main")
    assert managed.fetch("main") == head
    assert managed.head("main") is None  # no local branches until a proposal
    hooks = Path(managed.repository.config["core.hooksPath"])
    assert hooks == managed.path / "gitkb" / "hooks"
    for name in git_guard.HOOK_NAMES:
        assert os.access(hooks / name, os.X_OK)
    token = git_guard.token_path(managed.path)
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    reopened = ManagedRepo.open(managed.path)
    assert reopened.resolve("origin/main") == head
    assert reopened.remote_url() == str(remote)


def test_clone_file_url_and_failures_leave_nothing(tmp_path: Path, remote: Path) -> None:
    m = ManagedRepo.clone(f"file://{remote}", tmp_path / "m2", branch="main")
    assert m.tracking_head("main") == remote_sha(remote, "main")

    with pytest.raises(NotFound, match="nope"):
        ManagedRepo.clone(str(remote), tmp_path / "m3", branch="nope")
    assert not (tmp_path / "m3").exists()

    with pytest.raises(StoreUnavailable):
        ManagedRepo.clone(str(tmp_path / "missing.git"), tmp_path / "m4", branch="main")
    assert not (tmp_path / "m4").exists()

    with pytest.raises(InvalidArgument) as err:
        ManagedRepo.clone("https://bob:s3cr3t-token@example.com/x.git", tmp_path / "m5", branch="main")
    assert "s3cr3t-token" not in str(err.value)
    assert not (tmp_path / "m5").exists()

    with pytest.raises(Conflict):
        ManagedRepo.clone(str(remote), tmp_path / "m2", branch="main")
    with pytest.raises(NotFound):
        ManagedRepo.open(tmp_path / "nowhere")


def test_tree_map_lists_blobs_and_reports_specials(managed: ManagedRepo) -> None:
    tm = managed.tree_map("origin/main")
    assert set(tm) == {
        "README.md",
        "docs/kb-manifest.json",
        "docs/edw/guide.md",
        "docs/edw/empty.md",
        "docs/ops/runbook.md",
        "docs/ops/deep/nested/page.md",
    }
    assert tm.symlinks == ("docs/outside",)
    assert tm.submodules == ("docs/vendor",)
    assert tm["docs/edw/empty.md"] == str(pygit2.hash(b""))
    under = managed.tree_map("origin/main", under="docs/ops")
    assert set(under) == {"docs/ops/runbook.md", "docs/ops/deep/nested/page.md"}
    assert managed.tree_map("origin/main", under="nope") == {}
    assert managed.tree_map("origin/main", under="docs/outside/x").symlinks == ("docs/outside",)
    tm["mutated"] = "x"  # callers get copies; the cache is not affected
    assert "mutated" not in managed.tree_map("origin/main")


def test_read_blob_and_symlink_detection(managed: ManagedRepo) -> None:
    head = managed.resolve("origin/main")
    assert managed.read_blob(head, "docs/edw/guide.md").startswith(b"# Guide")
    tm = managed.tree_map(head)
    assert managed.read_blob_sha(tm["docs/ops/runbook.md"]).startswith(b"# Runbook")
    with pytest.raises(NotFound):
        managed.read_blob(head, "docs/edw/missing.md")
    with pytest.raises(InvalidArgument):
        managed.read_blob(head, "docs/outside")
    with pytest.raises(InvalidArgument):
        managed.read_blob(head, "docs/outside/etc/passwd")
    with pytest.raises(InvalidArgument):
        managed.read_blob(head, "docs/edw")
    with pytest.raises(NotFound):
        managed.resolve("no-such-branch")
    assert managed.is_symlink_path(head, "docs/outside")
    assert managed.is_symlink_path(head, "docs/outside/README.md")
    assert managed.is_symlink_path(head, "docs/outside/a/b/c.md")
    assert not managed.is_symlink_path(head, "docs/edw/guide.md")
    assert not managed.is_symlink_path(head, "docs/edw/guide.md/x")
    assert not managed.is_symlink_path(head, "docs/new/x.md")


# --------------------------------------------------------------------------- commits in memory


def test_commit_changes_modify_add_delete_rename(managed: ManagedRepo, remote: Path) -> None:
    base = managed.resolve("origin/main")
    before = managed.tree_map(base)
    sha = managed.commit_changes(
        BRANCH,
        base,
        {
            "docs/edw/guide.md": b"# Guide\n\nline one\nline 2\n",
            "docs/new/added.md": b"brand new\n",
            "docs/ops/deep/nested/page.md": None,
        },
        renames={"docs/ops/runbook.md": "docs/runbooks/runbook.md"},
        message="Edit guide\n\nnote: because",
        author=AUTHOR,
    )
    assert managed.head(BRANCH) == sha
    commit = managed.repository[sha]
    assert [str(p) for p in commit.parent_ids] == [base]
    assert commit.message == "Edit guide\n\nnote: because\n"
    assert commit.author.email == "gitkb@example.com"
    after = managed.tree_map(sha)
    assert "docs/ops/deep/nested/page.md" not in after
    assert not any(p.startswith("docs/ops/deep") for p in after)  # empty folders vanish
    assert after["docs/runbooks/runbook.md"] == before["docs/ops/runbook.md"]
    assert after.symlinks == ("docs/outside",) and after.submodules == ("docs/vendor",)

    plan = managed.diff_names(base, sha)
    assert plan == plan_changes(before, after)
    assert changed_files(plan) == [
        {"path": "docs/edw/guide.md", "status": "M"},
        {"path": "docs/new/added.md", "status": "A"},
        {"path": "docs/ops/deep/nested/page.md", "status": "D"},
        {"path": "docs/runbooks/runbook.md", "status": "R", "old_path": "docs/ops/runbook.md"},
    ]
    assert managed.diff_names(base, sha, under="docs/edw").modified == ("docs/edw/guide.md",)
    assert managed.diff_names(None, base).added == tuple(sorted(before))

    diff = managed.unified_diff(base, sha)
    assert "diff --git a/docs/edw/guide.md b/docs/edw/guide.md" in diff
    assert "-line two\n+line 2\n" in diff
    assert "rename from docs/ops/runbook.md" in diff
    assert "+brand new" in diff
    assert managed.unified_diff(sha, sha) == ""

    # nothing reached the remote, and the tracking ref did not move
    assert remote_sha(remote, BRANCH) is None
    assert managed.tracking_head("main") == base


def test_commit_changes_stacks_and_refuses_bad_input(managed: ManagedRepo) -> None:
    base = managed.resolve("origin/main")
    first = managed.commit_changes(BRANCH, base, {"docs/edw/a.md": b"a\n"}, message="a", author=AUTHOR)
    second = managed.commit_changes(BRANCH, first, {"docs/edw/b.md": b"b\n"}, message="b", author=AUTHOR)
    assert managed.is_ancestor(first, second) and not managed.is_ancestor(second, first)
    assert managed.is_ancestor(second, second)
    assert not managed.is_ancestor("0" * 40, second)

    bad: list[tuple[dict[str, bytes | None], dict[str, str], type[Exception]]] = [
        ({"docs/edw/b.md": b"b\n"}, {}, InvalidArgument),  # no change
        ({"docs/edw/zzz.md": None}, {}, NotFound),  # delete a missing file
        ({}, {"docs/edw/zzz.md": "docs/x/y.md"}, NotFound),  # rename a missing file
        ({}, {"docs/edw/a.md": "docs/edw/b.md"}, InvalidArgument),  # rename onto an existing file
        ({"docs/outside/x.md": b"x"}, {}, InvalidArgument),  # through a symlink
        ({"docs/outside": b"x"}, {}, InvalidArgument),  # the symlink itself
        ({"docs/edw/guide.md/x.md": b"x"}, {}, InvalidArgument),  # under a file
        ({"docs/edw": b"x"}, {}, InvalidArgument),  # a folder
        ({"docs/../x.md": b"x"}, {}, InvalidArgument),
        ({".git/config": b"x"}, {}, InvalidArgument),
        ({}, {}, InvalidArgument),
    ]
    for changes, renames, exc in bad:
        with pytest.raises(exc):
            managed.commit_changes(BRANCH, second, changes, renames=renames, message="m", author=AUTHOR)
        assert managed.head(BRANCH) == second, (changes, renames)

    with pytest.raises(Conflict, match="not at the base"):
        managed.commit_changes(BRANCH, base, {"docs/edw/c.md": b"c"}, message="m", author=AUTHOR)
    with pytest.raises(InvalidArgument):
        managed.commit_changes(BRANCH, second, {"docs/edw/c.md": b"c"}, message="  ", author=AUTHOR)
    with pytest.raises(InvalidArgument):
        managed.commit_changes("bad..name", base, {"docs/edw/c.md": b"c"}, message="m", author=AUTHOR)
    assert managed.head(BRANCH) == second

    # rename chains and swaps, with new content on a rename target
    third = managed.commit_changes(
        BRANCH,
        second,
        {"docs/edw/b.md": b"b changed\n"},
        renames={"docs/edw/a.md": "docs/edw/b.md", "docs/edw/b.md": "docs/edw/c.md"},
        message="chain",
        author=AUTHOR,
    )
    t2, t3 = managed.tree_map(second), managed.tree_map(third)
    assert "docs/edw/a.md" not in t3
    assert t3["docs/edw/c.md"] == t2["docs/edw/b.md"]
    assert managed.read_blob(third, "docs/edw/b.md") == b"b changed\n"

    managed.reset_branch(BRANCH, base)
    assert managed.head(BRANCH) == base
    with pytest.raises(Conflict):
        managed.reset_branch(BRANCH, second, expected=third)
    assert managed.delete_branch(BRANCH)
    assert not managed.delete_branch(BRANCH)
    assert managed.head(BRANCH) is None


def test_commit_keeps_exec_mode_and_can_empty_the_tree(managed: ManagedRepo) -> None:
    base = managed.resolve("origin/main")
    everything = dict.fromkeys(managed.tree_map(base))
    sha = managed.commit_changes("wipe", base, everything, message="wipe", author=AUTHOR)
    assert managed.tree_map(sha) == {}
    assert managed.tree_map(sha).symlinks == ("docs/outside",)


def test_diff_names_equals_full_tree_map_plan(managed: ManagedRepo) -> None:
    base = managed.resolve("origin/main")
    steps: list[tuple[dict[str, bytes | None], dict[str, str]]] = [
        ({"docs/a/1.md": b"same", "docs/a/2.md": b"same"}, {}),
        ({"docs/a/1.md": None}, {"docs/a/2.md": "docs/b/2.md"}),
        ({"docs/edw/empty.md": b"now full"}, {"docs/ops/runbook.md": "docs/ops/runbook2.md"}),
        ({"docs/c/same.md": b""}, {"docs/edw/guide.md": "docs/z/guide.md"}),
    ]
    shas = [base]
    for changes, renames in steps:
        shas.append(
            managed.commit_changes("walk", shas[-1], changes, renames=renames, message="s", author=AUTHOR)
        )
    for a in shas:
        for b in shas:
            assert managed.diff_names(a, b) == plan_changes(managed.tree_map(a), managed.tree_map(b))


# --------------------------------------------------------------------------- push, fetch, merge


def test_push_with_lease_creates_updates_and_refuses_stale(
    managed: ManagedRepo, remote: Path, work: Path
) -> None:
    base = managed.resolve("origin/main")
    c1 = managed.commit_changes(BRANCH, base, {"docs/edw/guide.md": b"v1\n"}, message="v1", author=AUTHOR)
    assert managed.push_with_lease(BRANCH, None) == c1
    assert remote_sha(remote, BRANCH) == c1
    assert managed.tracking_head(BRANCH) == c1
    assert managed.remote_head(BRANCH) == c1
    assert managed.remote_head("no/such") is None

    c2 = managed.commit_changes(BRANCH, c1, {"docs/edw/guide.md": b"v2\n"}, message="v2", author=AUTHOR)
    assert managed.push_with_lease(BRANCH, c1) == c2
    assert remote_sha(remote, BRANCH) == c2

    # someone else pushes to the branch: our lease (c2) is stale
    git(work, "fetch", "-q", "origin", BRANCH)
    git(work, "checkout", "-q", "-b", "other", "FETCH_HEAD")
    write(work, "docs/edw/theirs.md", "theirs\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "theirs")
    theirs = git(work, "rev-parse", "HEAD")
    git(work, "push", "-q", "origin", f"HEAD:{BRANCH}")

    c3 = managed.commit_changes(BRANCH, c2, {"docs/edw/guide.md": b"v3\n"}, message="v3", author=AUTHOR)
    with pytest.raises(Conflict, match="the remote branch moved"):
        managed.push_with_lease(BRANCH, c2)
    assert remote_sha(remote, BRANCH) == theirs
    assert managed.head(BRANCH) == c3
    assert managed.tracking_head(BRANCH) == c2
    with pytest.raises(Conflict):  # "must not exist" while it does
        managed.push_with_lease(BRANCH, None)
    assert remote_sha(remote, BRANCH) == theirs

    # after a fetch, pushing what the remote already has is fine
    assert managed.fetch(BRANCH) == theirs
    assert managed.push_with_lease(BRANCH, theirs, sha=theirs) == theirs
    with pytest.raises(InvalidArgument):
        managed.push_with_lease(BRANCH, "abc")
    with pytest.raises(NotFound):
        managed.push_with_lease("gitkb/none", None)


def test_fetch_after_force_push_and_diff_via_trees(managed: ManagedRepo, work: Path) -> None:
    old = managed.resolve("origin/main")
    new1 = push_upstream(work, "second", {"docs/edw/guide.md": "changed\n"})
    assert managed.fetch("main") == new1
    assert managed.is_ancestor(old, new1)
    # rewrite history upstream: a new root commit, force-pushed
    git(work, "checkout", "-q", "--orphan", "rewritten")
    write(work, "docs/edw/guide.md", "rewritten\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "rewritten root")
    git(work, "push", "-q", "--force", "origin", "HEAD:main")
    new2 = git(work, "rev-parse", "HEAD")
    assert managed.fetch("main") == new2
    assert managed.tracking_head("main") == new2
    assert not managed.is_ancestor(old, new2)
    plan = managed.diff_names(old, new2)
    assert plan == plan_changes(managed.tree_map(old), managed.tree_map(new2))
    assert "docs/edw/guide.md" in plan.modified


def test_fetch_of_a_deleted_remote_branch(managed: ManagedRepo, remote: Path) -> None:
    base = managed.resolve("origin/main")
    managed.commit_changes(BRANCH, base, {"docs/edw/x.md": b"x"}, message="x", author=AUTHOR)
    managed.push_with_lease(BRANCH, None)
    assert managed.fetch(BRANCH) == remote_sha(remote, BRANCH)
    git(remote, "update-ref", "-d", f"refs/heads/{BRANCH}")
    with pytest.raises(NotFound):
        managed.fetch(BRANCH)
    assert managed.tracking_head(BRANCH) is None


def test_merge_into_makes_a_two_parent_commit(managed: ManagedRepo, remote: Path, work: Path) -> None:
    base = managed.resolve("origin/main")
    c1 = managed.commit_changes(
        BRANCH,
        base,
        {"docs/edw/guide.md": b"# Guide\n\nline one\nline two\nline three\n"},
        renames={"docs/ops/runbook.md": "docs/ops/runbook-v2.md"},
        message="proposal",
        author=AUTHOR,
    )
    managed.push_with_lease(BRANCH, None)
    main_moved = push_upstream(work, "meanwhile", {"docs/other/new.md": "other\n"})

    merged = merge_into(remote, BRANCH, "main", "Merge gitkb proposal", author=("Forge", "forge@local"))
    bare = pygit2.Repository(str(remote))
    commit = bare[merged]
    assert [str(p) for p in commit.parent_ids] == [main_moved, c1]
    assert remote_sha(remote, "main") == merged
    assert managed.fetch("main") == merged
    tm = managed.tree_map(merged)
    assert "docs/other/new.md" in tm and "docs/ops/runbook-v2.md" in tm and "docs/ops/runbook.md" not in tm
    assert managed.read_blob(merged, "docs/edw/guide.md").endswith(b"line three\n")
    assert changed_files(managed.diff_names(main_moved, merged)) == [
        {"path": "docs/edw/guide.md", "status": "M"},
        {"path": "docs/ops/runbook-v2.md", "status": "R", "old_path": "docs/ops/runbook.md"},
    ]

    with pytest.raises(Conflict, match="already merged"):
        merge_into(remote, BRANCH, "main", "again")
    with pytest.raises(NotFound):
        merge_into(remote, "no-such", "main", "x")


def test_merge_into_conflict_leaves_base(managed: ManagedRepo, remote: Path, work: Path) -> None:
    base = managed.resolve("origin/main")
    managed.commit_changes(BRANCH, base, {"docs/edw/guide.md": b"ours\n"}, message="o", author=AUTHOR)
    managed.push_with_lease(BRANCH, None)
    theirs = push_upstream(work, "theirs", {"docs/edw/guide.md": "theirs\n"})
    with pytest.raises(Conflict) as err:
        merge_into(remote, BRANCH, "main", "merge")
    assert err.value.details["conflicting_paths"] == ["docs/edw/guide.md"]
    assert remote_sha(remote, "main") == theirs


# --------------------------------------------------------------------------- guard


def test_guard_refuses_hand_made_ref_updates_and_commits(managed: ManagedRepo, tmp_path: Path) -> None:
    base = managed.resolve("origin/main")
    gd = managed.path

    out = git(gd, "update-ref", "refs/heads/by-hand", base, check=False)
    assert "managed by gitkb" in out and "propose_kb_edit" in out
    assert managed.head("by-hand") is None
    out = git(gd, "branch", "by-hand", base, check=False)
    assert "managed by gitkb" in out
    out = git(gd, "update-ref", "refs/heads/by-hand", base, env={"GITKB_WRITER_TOKEN": "guess"}, check=False)
    assert "managed by gitkb" in out
    out = git(gd, "fetch", "origin", "main:refs/heads/fetched", check=False)
    assert "ref updates aborted by hook" in out

    # a linked worktree made with the token; then a commit by hand in it is refused twice over
    wt = tmp_path / "wt"
    git(gd, "worktree", "add", "-q", "--detach", str(wt), base, env=managed.writer_env())
    write(wt, "docs/edw/hand.md", "by hand\n")
    git(wt, "add", "-A")
    out = git(wt, "commit", "-m", "by hand", check=False)
    assert "managed by gitkb; use propose_kb_edit" in out
    out = git(wt, "commit", "--no-verify", "-m", "by hand", check=False)
    assert "ref updates aborted by hook" in out
    assert git(wt, "rev-parse", "HEAD") == base

    # gitkb's own writes still work, through the CLI too
    sha = managed.commit_changes(BRANCH, base, {"docs/edw/x.md": b"x"}, message="x", author=AUTHOR)
    git(gd, "update-ref", "refs/heads/with-token", sha, env=managed.writer_env())
    assert managed.head("with-token") == sha

    # a reinstall rotates the token: the old one stops working
    old = managed.writer_env()
    managed.install_guard()
    assert managed.writer_env() != old
    assert "managed by gitkb" in git(gd, "update-ref", "refs/heads/old-token", sha, env=old, check=False)


def test_hooks_ship_with_the_package() -> None:
    src = git_guard.hooks_source()
    for name in git_guard.HOOK_NAMES:
        hook = src / name
        assert hook.is_file() and os.access(hook, os.X_OK)
        assert hook.read_text().startswith("#!/bin/sh")
    pre_commit = subprocess.run([str(src / "pre-commit")], capture_output=True, text=True)
    assert pre_commit.returncode == 1 and "propose_kb_edit" in pre_commit.stderr


# --------------------------------------------------------------------------- credentials and redaction


def test_redact_hides_tokens_plain_and_percent_encoded() -> None:
    token = "ghp_ab+cd/ef=1234"
    text = (
        f"fatal: unable to access 'https://x-access-token:{token}@github.com/o/r.git/': "
        f"token {token} and encoded ghp_ab%2Bcd%2Fef%3D1234 Authorization: Bearer {token}"
    )
    out = redact(text, [token, None, ""])
    assert token not in out and "ghp_ab" not in out
    assert "https://***@github.com/o/r.git/" in out
    assert redact("nothing secret here", ["ab"]) == "nothing secret here"
    creds = GitCredentials(token=lambda: token)
    assert token not in repr(creds) and creds.secrets() == [token]


def test_askpass_script_answers_from_env(tmp_path: Path) -> None:
    script = write_askpass(tmp_path / "gk")
    assert script.read_text() == ASKPASS_SCRIPT
    env = {**os.environ, "GITKB_GIT_PASSWORD": "tok-123456", "GITKB_GIT_USERNAME": "bot"}
    run = lambda prompt: subprocess.run([str(script), prompt], capture_output=True, text=True, env=env)  # noqa: E731
    assert run("Username for 'https://h': ").stdout == "bot\n"
    assert run("Password for 'https://bot@h': ").stdout == "tok-123456\n"


def test_token_is_redacted_from_remote_errors(
    tmp_path: Path, managed: ManagedRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "tok-SUPERSECRET-42"
    creds = GitCredentials(token=token)
    url = "http://127.0.0.1:9/nothing.git"  # discard port: connection refused
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file:http")
    with pytest.raises(StoreUnavailable) as err:
        ManagedRepo.clone(url, tmp_path / "h", branch="main", credentials=creds)
    assert token not in str(err.value)
    assert "127.0.0.1:9" in str(err.value)
    managed.repository.remotes.set_url("origin", url)
    managed.repository.remotes.set_push_url("origin", url)
    m = ManagedRepo.open(managed.path, credentials=creds)
    sha = m.commit_changes(
        BRANCH, m.resolve("origin/main"), {"docs/e/x.md": b"x"}, message="x", author=AUTHOR
    )
    with pytest.raises(ForgeError) as perr:
        m.push_with_lease(BRANCH, None, sha=sha)
    assert token not in str(perr.value) and "127.0.0.1:9" in str(perr.value)


# --------------------------------------------------------------------------- HTTPS-style auth, end to end


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_remote(tmp_path: Path, remote: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """``git http-backend`` behind HTTP basic auth on 127.0.0.1 (plain HTTP stands in for HTTPS)."""
    token = "tok-" + "x7" * 10
    git(remote, "config", "http.receivepack", "true")

    def app(environ, start_response):  # type: ignore[no-untyped-def]
        expected = "Basic " + base64.b64encode(f"bot:{token}".encode()).decode()
        if environ.get("HTTP_AUTHORIZATION") != expected:
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"')])
            return [b"auth required"]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        cgi_env = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": str(remote.parent),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": "bot",
            "REQUEST_METHOD": environ["REQUEST_METHOD"],
            "PATH_INFO": environ["PATH_INFO"],
            "QUERY_STRING": environ.get("QUERY_STRING", ""),
            "CONTENT_TYPE": environ.get("CONTENT_TYPE", ""),
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": environ.get("HTTP_CONTENT_ENCODING", ""),
            "GIT_PROTOCOL": environ.get("HTTP_GIT_PROTOCOL", ""),
        }
        proc = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=cgi_env)
        head, _, payload = proc.stdout.partition(b"\r\n\r\n")
        status, headers = "200 OK", []
        for line in head.decode().split("\r\n"):
            key, _, value = line.partition(": ")
            if key.lower() == "status":
                status = value
            elif key:
                headers.append((key, value))
        start_response(status, headers)
        return [payload]

    server = make_server("127.0.0.1", 0, app, server_class=WSGIServer, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file:http")
    try:
        yield f"http://127.0.0.1:{server.server_port}/{remote.name}", token
    finally:
        server.shutdown()
        server.server_close()


def test_http_token_auth_for_fetch_and_push(
    tmp_path: Path, http_remote: tuple[str, str], remote: Path
) -> None:
    url, token = http_remote
    with pytest.raises(Unauthorized) as err:
        ManagedRepo.clone(url, tmp_path / "noauth", branch="main")
    assert not (tmp_path / "noauth").exists()
    wrong = GitCredentials(token="wrong-token-123", username="bot")
    with pytest.raises(Unauthorized) as err:
        ManagedRepo.clone(url, tmp_path / "wrong", branch="main", credentials=wrong)
    assert "wrong-token-123" not in str(err.value)

    creds = GitCredentials(token=lambda: token, username="bot")
    m = ManagedRepo.clone(url, tmp_path / "h", branch="main", credentials=creds)
    base = m.tracking_head("main")
    assert base == remote_sha(remote, "main")
    sha = m.commit_changes(BRANCH, base, {"docs/edw/http.md": b"over http\n"}, message="h", author=AUTHOR)
    assert m.push_with_lease(BRANCH, None) == sha
    assert remote_sha(remote, BRANCH) == sha
    assert m.remote_head(BRANCH) == sha

    denied = ManagedRepo.open(m.path, credentials=wrong)
    with pytest.raises(Unauthorized) as perr:
        denied.push_with_lease(BRANCH, sha, sha=base)
    assert "wrong-token-123" not in str(perr.value)
    assert remote_sha(remote, BRANCH) == sha
    assert token not in (m.path / "config").read_text()


# --------------------------------------------------------------------------- size


@pytest.mark.slow
def test_commit_one_file_in_a_big_tree_is_fast(tmp_path: Path) -> None:
    w = tmp_path / "big"
    w.mkdir()
    git(w, "init", "-q", "-b", "main")
    for i in range(2757):
        write(w, f"docs/guide-{i % 40}/sub-{i % 7}/page-{i}.md", f"# page {i}\n\n" + "text " * 200)
    git(w, "add", "-A")
    git(w, "commit", "-q", "-m", "big")
    m = ManagedRepo.clone(str(w), tmp_path / "m", branch="main")
    base = m.resolve("origin/main")
    assert len(m.tree_map(base)) == 2757
    start = time.perf_counter()
    sha = m.commit_changes(
        BRANCH, base, {"docs/guide-3/sub-3/page-3.md": b"new\n"}, message="m", author=AUTHOR
    )
    elapsed = time.perf_counter() - start
    assert m.diff_names(base, sha).modified == ("docs/guide-3/sub-3/page-3.md",)
    assert elapsed < 1.0  # typically ~10 ms; generous for slow CI machines


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_git_protocol_via_git_daemon(tmp_path: Path, remote: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = _free_port()
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--export-all",
            "--reuseaddr",
            "--listen=127.0.0.1",
            f"--port={port}",
            f"--base-path={remote.parent}",
            str(remote.parent),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    try:
        try:
            wait_until(listening, timeout=10, interval=0.05, what="git daemon to listen")
        except WaitTimeout:
            pytest.skip("git daemon did not start")
        monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "git")
        m = ManagedRepo.clone(f"git://127.0.0.1:{port}/{remote.name}", tmp_path / "g", branch="main")
        assert m.tracking_head("main") == remote_sha(remote, "main")
        assert m.remote_head("main") == remote_sha(remote, "main")
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def test_ssh_credentials_reach_openssh_through_the_environment(tmp_path: Path) -> None:
    key = tmp_path / "id ed25519"
    env = cli_auth_env(GitCredentials(ssh_key=key), tmp_path / "askpass.sh")
    assert env["GIT_SSH_COMMAND"] == f"ssh -i '{key}' -o IdentitiesOnly=yes -o BatchMode=yes"
    env = cli_auth_env(GitCredentials(ssh_key=key, ssh_passphrase="pass-phrase"), tmp_path / "askpass.sh")
    assert "BatchMode" not in env["GIT_SSH_COMMAND"] and env["GITKB_GIT_PASSWORD"] == "pass-phrase"
    assert env["SSH_ASKPASS"] == str(tmp_path / "askpass.sh") and env["SSH_ASKPASS_REQUIRE"] == "force"
    env = cli_auth_env(GitCredentials(token="t0ken-abc"), tmp_path / "askpass.sh")
    assert env["GITKB_GIT_PASSWORD"] == "t0ken-abc" and env["GITKB_GIT_USERNAME"] == "x-access-token"
    assert env["GIT_TERMINAL_PROMPT"] == "0"


EXISTING = [
    "README.md",
    "docs/edw/guide.md",
    "docs/edw/empty.md",
    "docs/ops/runbook.md",
    "docs/ops/deep/nested/page.md",
]
NEW = ["docs/edw/n1.md", "docs/new/a", "docs/new/a/b.md", "docs/new/deep/er/c.md", "top.md"]
CONTENTS = st.sampled_from([None, b"", b"x\n", b"# Guide\n\nline one\nline two\n", b"new\n"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(st.sampled_from(EXISTING + NEW), CONTENTS, min_size=1, max_size=6))
def test_commit_changes_matches_a_model(managed: ManagedRepo, changes: dict[str, bytes | None]) -> None:
    base = managed.resolve("origin/main")
    before = managed.tree_map(base)
    expected = dict(before)
    missing = False
    for path, content in changes.items():
        if content is None:
            missing |= path not in before
            expected.pop(path, None)
        else:
            expected[path] = str(pygit2.hash(content))
    file_and_folder = changes.get("docs/new/a") is not None and changes.get("docs/new/a/b.md") is not None
    managed.delete_branch("hyp")
    try:
        sha = managed.commit_changes("hyp", base, changes, message="hyp", author=AUTHOR)
    except NotFound:
        assert missing
        assert managed.head("hyp") is None
        return
    except InvalidArgument:
        assert not missing and (file_and_folder or expected == before)
        assert managed.head("hyp") is None
        return
    assert not missing and not file_and_folder and expected != before
    after = managed.tree_map(sha)
    assert after == expected
    assert after.symlinks == before.symlinks
    assert managed.diff_names(base, sha) == plan_changes(before, expected)
    for path, content in changes.items():
        if content is not None:
            assert managed.read_blob(sha, path) == content
