"""The guard on a managed repository: hooks that refuse hand-made ref updates and commits.

Layout inside the managed repository's git dir::

    <git dir>/gitkb/hooks/reference-transaction   copies of the package's hooks/
    <git dir>/gitkb/hooks/pre-commit
    <git dir>/gitkb/writer-token                  mode 0600, fresh on every install
    core.hooksPath = <git dir>/gitkb/hooks        (absolute: git resolves a relative
                                                   hooksPath against its cwd)

The reference-transaction hook lets a ref update through only when the
environment has ``GITKB_WRITER_TOKEN`` equal to the token file; gitkb's own
git CLI calls get it from :func:`writer_env`. The pre-commit hook always
refuses (gitkb never runs ``git commit``).

Limits, stated plainly: libgit2 (pygit2) never runs hooks, so the guard only
bites the git CLI -- a person typing git in the managed repository, or a tool
shelling out to it. Anyone can bypass hooks (``-c core.hooksPath=``,
``--no-verify`` for pre-commit). Real enforcement is file ownership: the
service user owns the managed repository. The hooks stop accidents.

The token is per installation, not secret from the service user: each
``install_guard`` writes a new one, and writers read the current file, so
several gitkb processes sharing a workspace keep working after a reinstall.
"""

from __future__ import annotations

import os
import secrets
import shutil
from importlib import resources
from pathlib import Path

import pygit2

WRITER_TOKEN_ENV = "GITKB_WRITER_TOKEN"
HOOK_NAMES: tuple[str, ...] = ("reference-transaction", "pre-commit")
GUARD_DIRNAME = "gitkb"


def guard_dir(git_dir: Path) -> Path:
    return Path(git_dir) / GUARD_DIRNAME


def token_path(git_dir: Path) -> Path:
    return guard_dir(git_dir) / "writer-token"


def hooks_source() -> Path:
    """Where the shipped hooks are: ``gitkb/hooks`` in the package (a link to the repo's ``hooks/``)."""
    return Path(str(resources.files("gitkb") / "hooks"))


def install_guard(git_dir: Path) -> Path:
    """Copy the hooks into ``<git dir>/gitkb/hooks``, write a fresh token, set ``core.hooksPath``.

    Returns the hooks directory. Safe to run again (it rotates the token).
    """
    git_dir = Path(git_dir).resolve()
    hooks_dir = guard_dir(git_dir) / "hooks"
    hooks_dir.mkdir(parents=True, exist_ok=True)
    src = hooks_source()
    for name in HOOK_NAMES:
        tmp = hooks_dir / f".{name}.tmp"
        shutil.copyfile(src / name, tmp)
        tmp.chmod(0o755)
        os.replace(tmp, hooks_dir / name)
    _write_private(token_path(git_dir), secrets.token_hex(32))
    pygit2.Repository(str(git_dir)).config["core.hooksPath"] = str(hooks_dir)
    return hooks_dir


def read_token(git_dir: Path) -> str | None:
    try:
        return token_path(git_dir).read_text().strip() or None
    except FileNotFoundError:
        return None


def writer_env(git_dir: Path) -> dict[str, str]:
    """Environment entries that let gitkb's own git CLI calls through the guard."""
    token = read_token(git_dir)
    return {WRITER_TOKEN_ENV: token} if token else {}


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
