"""Merge a branch into another inside a bare repository: the embedded "local forge" merge button."""

from __future__ import annotations

from pathlib import Path

import pygit2

from gitkb.core.errors import Conflict, NotFound
from gitkb.stores.git_cli import run_git
from gitkb.stores.git_commits import Person, write_commit


def merge_into(
    bare_remote_path: str | Path,
    head_branch: str,
    base_branch: str,
    message: str,
    *,
    author: Person | None = None,
) -> str:
    """Merge ``head_branch`` into ``base_branch`` with a real two-parent merge commit; return its sha.

    Always a merge commit (never a fast-forward), like a forge's merge
    button. Content conflicts raise ``Conflict`` naming the paths; a head
    already contained in the base raises ``Conflict`` too. The base ref is
    moved with a compare-and-swap (``git update-ref <ref> <new> <old>``), so a
    concurrent push to the base is never lost.
    """
    path = Path(bare_remote_path)
    try:
        repo = pygit2.Repository(str(path))
    except pygit2.GitError:
        raise NotFound(f"no git repository at {path}") from None
    base_ref, head_ref = f"refs/heads/{base_branch}", f"refs/heads/{head_branch}"
    base = _branch_commit(repo, base_ref)
    head = _branch_commit(repo, head_ref)
    if repo.descendant_of(base.id, head.id) or base.id == head.id:
        raise Conflict(f"{head_branch!r} is already merged into {base_branch!r}; nothing to merge")
    ancestor_id = repo.merge_base(base.id, head.id)
    if ancestor_id is None:
        raise Conflict(f"{head_branch!r} and {base_branch!r} share no history; cannot merge")
    ancestor = repo[ancestor_id].peel(pygit2.Commit)
    index = repo.merge_trees(ancestor.tree, base.tree, head.tree)
    if index.conflicts is not None:
        paths = sorted({(e[1] or e[2] or e[0]).path for e in index.conflicts if any(e)})
        raise Conflict(
            f"merging {head_branch!r} into {base_branch!r} conflicts in: {', '.join(paths)}",
            details={"conflicting_paths": paths},
        )
    tree_id = index.write_tree(repo)
    merge_id = write_commit(
        repo, tree_id, [base.id, head.id], message, author or ("gitkb", "gitkb@localhost")
    )
    run_git(
        path,
        ["update-ref", "-m", f"merge {head_branch}", base_ref, str(merge_id), str(base.id)],
        error=Conflict,
    )
    return str(merge_id)


def _branch_commit(repo: pygit2.Repository, ref: str) -> pygit2.Commit:
    try:
        return repo.lookup_reference(ref).peel(pygit2.Commit)
    except (KeyError, pygit2.InvalidSpecError):
        raise NotFound(f"branch {ref.removeprefix('refs/heads/')!r} not found") from None
