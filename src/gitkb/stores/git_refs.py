"""Refs of a managed repository: branch names checked, where a ref points, compare-and-swap moves.

A local branch moves only through ``git update-ref <ref> <new> <old>`` run with gitkb's writer
token, so the guard hook (:mod:`gitkb.stores.git_guard`) lets it through and a ref that moved
meanwhile makes it fail (``Conflict``) instead of being overwritten.
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from gitkb.core.errors import Conflict, InvalidArgument
from gitkb.stores import git_guard
from gitkb.stores.git_cli import run_git

ZERO_SHA = "0" * 40


def check_branch(branch: str) -> None:
    """``InvalidArgument`` unless ``branch`` is a plain branch name (no ``refs/``, no leading ``-``)."""
    if (
        not isinstance(branch, str)
        or not branch
        or branch.startswith(("-", "refs/"))
        or branch.endswith(".lock")
    ):
        raise InvalidArgument(f"invalid branch name {branch!r}")
    if not pygit2.reference_is_valid_name(f"refs/heads/{branch}"):
        raise InvalidArgument(f"invalid branch name {branch!r}")


def ref_sha(repo: pygit2.Repository, ref: str) -> str | None:
    """The commit ``ref`` points at (symbolic refs resolved), or None when it does not exist."""
    try:
        return str(repo.lookup_reference(ref).resolve().target)
    except (KeyError, pygit2.InvalidSpecError):
        return None


def update_ref(path: Path, ref: str, new: str, old: str | None, reason: str) -> None:
    """Move ``ref`` to ``new`` if it is at ``old`` (None: wherever it is); ``Conflict`` otherwise."""
    args = ["update-ref", "-m", reason, ref, new, *([old] if old else [])]
    run_git(path, args, env=git_guard.writer_env(path), error=Conflict)
