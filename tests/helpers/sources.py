"""Real git repositories for the source, proposal and review tests.

``Upstream`` is a working clone of example_kb_repo/ whose remote is a bare
repository (the "forge" side); gitkb's source points at the bare one. The fixtures
that build them (``git_env``, ``upstream``, ``source_ws``) are in tests/conftest.py.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SOURCE", "Upstream", "git", "with_roots"]

SOURCE = "handbook"


def with_roots(toml: str, *roots: Path) -> str:
    """``toml`` with ``[server] allowed_roots`` naming ``roots``: over HTTP and the webhooks a
    source whose url is a path of the disk (the bare ``remote.git``) syncs only inside them."""
    line = "allowed_roots = [" + ", ".join(f'"{r}"' for r in roots) + "]\n"
    if "[server]\n" in toml:
        return toml.replace("[server]\n", "[server]\n" + line, 1)
    return "[server]\n" + line + toml


def git(cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip() if check else proc.stdout + proc.stderr


def bare_repo(tmp_path: Path, work: Path) -> Path:
    """``work`` (files already written) committed on ``main`` and cloned bare to
    ``tmp_path/remote.git``: the remote a source follows."""
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "docs")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(remote))
    return remote


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
