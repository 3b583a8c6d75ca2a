"""Shared set-up for the source, proposal and review tests: real git repositories.

``Upstream`` is a working clone of example_kb_repo/ whose remote is a bare
repository (the "forge" side); gitkb's source points at the bare one.
Import the fixtures into a test module with ``from test_sources_helpers import *``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["Upstream", "git", "git_env", "upstream", "source_ws", "SOURCE"]

SOURCE = "handbook"


def git(cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip() if check else proc.stdout + proc.stderr


@dataclass
class Upstream:
    work: Path
    remote: Path

    def write(self, rel: str, text: str) -> None:
        p = self.work / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    def commit_push(self, message: str, *, add: bool = True) -> str:
        if add:
            git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "-m", message)
        git(self.work, "push", "-q", "origin", "HEAD:main")
        return git(self.work, "rev-parse", "HEAD")

    def remote_sha(self, branch: str) -> str | None:
        out = git(self.remote, "rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False).strip()
        return out if len(out) == 40 else None

    def pull(self) -> None:
        git(self.work, "pull", "-q", "--no-rebase", "origin", "main")

    def read_remote(self, branch: str, path: str) -> str:
        return git(self.remote, "show", f"{branch}:{path}")


@pytest.fixture
def git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "userhome"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GITKB_WRITER_TOKEN"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def upstream(git_env: None, kb_copy: Path, tmp_path: Path) -> Upstream:
    git(kb_copy, "init", "-q", "-b", "main")
    git(kb_copy, "add", "-A")
    git(kb_copy, "commit", "-q", "-m", "initial handbook")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(kb_copy), str(remote))
    git(kb_copy, "remote", "add", "origin", str(remote))
    git(kb_copy, "fetch", "-q", "origin")
    git(kb_copy, "branch", "-q", "--set-upstream-to=origin/main", "main")
    return Upstream(kb_copy, remote)


@pytest.fixture
def source_ws(ws: Any, upstream: Upstream) -> Iterator[Any]:
    """``ws`` with the example handbook registered as source ``handbook`` and synced."""
    added = ws.source_add(SOURCE, str(upstream.remote))
    assert added["Success"], added
    synced = ws.source_sync(SOURCE)
    assert synced["Success"], synced
    yield ws
