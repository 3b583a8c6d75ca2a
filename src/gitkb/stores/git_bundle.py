"""A managed clone as one file and back: ``git bundle`` of every ref (the tracked branch as fetched,
the proposal branches ``gitkb/proposals/*`` with their staged commits, tags), and a new guarded
bare clone made from such a file without the network.

A bundle never holds the guard's writer token or the clone's hooks: the restored clone gets a fresh
guard (:mod:`gitkb.stores.git_guard`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pygit2

from gitkb.core.errors import StoreUnavailable, ValidationFailed
from gitkb.stores import git_guard
from gitkb.stores.git_cli import run_git


def refs_of(git_dir: Path) -> dict[str, str]:
    """Every ref of the repository at ``git_dir`` and the commit it names."""
    repo = pygit2.Repository(str(git_dir))
    out: dict[str, str] = {}
    for name in repo.references:
        ref = repo.references[name].resolve()
        out[name] = str(ref.target)
    return out


def create(git_dir: Path, dest: Path) -> dict[str, str]:
    """Write every ref of ``git_dir`` and the history behind it to ``dest``; returns the refs.
    A repository without refs writes nothing and returns ``{}``."""
    refs = refs_of(git_dir)
    if not refs:
        return {}
    run_git(git_dir, ["bundle", "create", str(dest), "--all"], timeout=600)
    return refs


def clone_from(bundle: Path, git_dir: Path, *, url: str, refs: dict[str, str]) -> None:
    """A guarded bare clone at ``git_dir`` (absent or empty) with the bundle's refs and ``origin``
    at ``url``; every ref must point where ``refs`` (the manifest) says. Nothing is left on failure."""
    created = not git_dir.exists()
    try:
        repo = pygit2.init_repository(str(git_dir), bare=True)
        repo.remotes.create("origin", url)
        repo.config["gitkb.managed"] = "true"
        if refs:
            run_git(git_dir, ["bundle", "verify", str(bundle)], error=ValidationFailed)
            run_git(git_dir, ["fetch", "--quiet", "--no-tags", str(bundle), "+refs/*:refs/*"], timeout=600)
        got = refs_of(git_dir)
        if got != refs:
            wrong = sorted(set(got.items()) ^ set(refs.items()))
            raise ValidationFailed(
                f"the bundle for {git_dir.name} does not hold the refs its manifest lists: {wrong}"
            )
        git_guard.install_guard(git_dir)
    except pygit2.GitError as exc:
        _remove(git_dir, created)
        raise StoreUnavailable(f"cannot make the clone at {git_dir}: {exc}") from exc
    except BaseException:
        _remove(git_dir, created)
        raise


def _remove(git_dir: Path, created: bool) -> None:
    if created:
        shutil.rmtree(git_dir, ignore_errors=True)
