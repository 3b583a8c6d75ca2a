"""The embedded local forge: change requests in the catalog, merges in a bare repository on disk."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitkb.core.errors import Conflict, ForgeError, InvalidArgument
from gitkb.forges import FORGES, Forge, ForgeConfig, create_forge, open_or_update
from gitkb.forges.local import LocalForge, local_path
from gitkb.stores.catalog import Catalog

HEAD = "gitkb/proposals/kb"


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "docs" / "a").mkdir(parents=True)
    (work / "docs" / "a" / "one.md").write_text("one\n")
    (work / "docs" / "a" / "two.md").write_text("two\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "base")
    git(work, "checkout", "-q", "-b", HEAD)
    (work / "docs" / "a" / "one.md").write_text("one, edited\n")
    git(work, "mv", "docs/a/two.md", "docs/a/deux.md")
    (work / "docs" / "a" / "new.md").write_text("new\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "proposal")
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    git(work, "push", "-q", str(bare), f"{HEAD}:{HEAD}")
    return bare


@pytest.fixture
def forge(tmp_path: Path, remote: Path) -> LocalForge:
    catalog = Catalog(tmp_path / "catalog.sqlite3")
    f = create_forge(ForgeConfig(kind="local", repo=str(remote), options={"catalog": catalog}))
    assert isinstance(f, LocalForge)
    return f


def test_registered_and_a_forge() -> None:
    assert "local" in FORGES
    with pytest.raises(InvalidArgument, match="catalog"):
        create_forge(ForgeConfig(kind="local", repo="/x"))


def test_create_find_update_get_files(forge: LocalForge) -> None:
    assert isinstance(forge, Forge)
    assert forge.find_open_by_head(HEAD) is None
    cr, created = open_or_update(forge, head=HEAD, base="main", title="Edit", body="b")
    assert created and cr.number == 1 and cr.state == "open" and cr.head == HEAD and cr.base == "main"
    assert forge.find_open_by_head(HEAD) == cr
    cr2, created2 = open_or_update(forge, head=HEAD, base="main", title="Edit 2", body="b2")
    assert not created2 and cr2.number == 1 and cr2.title == "Edit 2"
    with pytest.raises(ForgeError) as exc:
        forge.create(head=HEAD, base="main", title="dup", body="")
    assert exc.value.details["kind"] == "already_exists"
    assert forge.changed_files(1) == [
        {"path": "docs/a/deux.md", "status": "R", "old_path": "docs/a/two.md"},
        {"path": "docs/a/new.md", "status": "A"},
        {"path": "docs/a/one.md", "status": "M"},
    ]
    with pytest.raises(ForgeError) as missing:
        forge.get(9)
    assert missing.value.details["kind"] == "not_found"
    with pytest.raises(ForgeError) as nobranch:
        forge.create(head="nope", base="main", title="t", body="")
    assert nobranch.value.details["kind"] == "validation"


def test_merge_writes_a_merge_commit(forge: LocalForge, remote: Path) -> None:
    base_before = git(remote, "rev-parse", "main")
    head = git(remote, "rev-parse", HEAD)
    forge.create(head=HEAD, base="main", title="Edit", body="")
    cr = forge.merge(1)
    assert cr.state == "merged" and cr.merged and cr.merge_commit_sha == git(remote, "rev-parse", "main")
    assert git(remote, "rev-list", "--parents", "-n", "1", "main").split()[1:] == [base_before, head]
    assert [f["status"] for f in forge.changed_files(1)] == [
        "R",
        "A",
        "M",
    ]  # still answerable after the merge
    with pytest.raises(Conflict):
        forge.merge(1)
    assert forge.find_open_by_head(HEAD) is None
    assert [c.state for c in forge.list()] == ["merged"]


def test_close_closes_once_and_the_next_request_gets_a_new_number(forge: LocalForge) -> None:
    forge.create(head=HEAD, base="main", title="Edit", body="")
    assert forge.close(1).state == "closed"
    with pytest.raises(Conflict):
        forge.close(1)
    cr, created = open_or_update(forge, head=HEAD, base="main", title="again", body="")
    assert created and cr.number == 2


def test_only_paths_and_file_urls_are_local_remotes() -> None:
    assert local_path("/srv/kb.git") == Path("/srv/kb.git")
    assert local_path("file:///srv/k%20b.git") == Path("/srv/k b.git")
    for url in ("https://github.com/o/r.git", "git@github.com:o/r.git", "ssh://git@h/r.git", "git://h/r"):
        assert local_path(url) is None


def test_network_remote_cannot_be_merged_here(tmp_path: Path) -> None:
    f = LocalForge(
        ForgeConfig(
            kind="local",
            repo="https://example.com/r.git",
            options={"catalog": Catalog(tmp_path / "c.sqlite3")},
        )
    )
    cr = f.create(head=HEAD, base="main", title="t", body="")
    assert cr.number == 1
    with pytest.raises(InvalidArgument, match="on this machine"):
        f.merge(1)
