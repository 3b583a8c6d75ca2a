"""Replay staged commits onto a new base, in memory (a cherry-pick without a checkout).

Used when a proposal is discarded from the middle of a proposal branch, and
after a merge, to carry the proposals staged after the merged ones onto the
new base. Each commit's change (its parent's tree -> its tree) is merged
into the current tip with libgit2's three-way tree merge; a commit that
conflicts is left out and reported, one whose change is already in the tip
is reported as ``empty``. No ref moves here: callers move the branch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pygit2

from gitkb.core.errors import NotFound
from gitkb.stores.git_commits import Person, write_commit


@dataclass(frozen=True)
class Replayed:
    """``commits``: old sha -> new sha; ``conflicts``: old sha -> paths; ``empty``: old shas."""

    head: str
    commits: dict[str, str] = field(default_factory=dict)
    conflicts: dict[str, list[str]] = field(default_factory=dict)
    empty: tuple[str, ...] = ()


def _commit(repo: pygit2.Repository, sha: str) -> pygit2.Commit:
    try:
        return repo.revparse_single(sha).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError):
        raise NotFound(f"commit {sha!r} not found") from None


def merge_base(repo: pygit2.Repository, a: str, b: str) -> str | None:
    oid = repo.merge_base(_commit(repo, a).id, _commit(repo, b).id)
    return str(oid) if oid is not None else None


def replay(repo: pygit2.Repository, onto: str, commits: Sequence[tuple[str, str]]) -> Replayed:
    """Re-apply each ``(parent_sha, commit_sha)`` in order on top of ``onto``."""
    tip = _commit(repo, onto)
    mapping: dict[str, str] = {}
    conflicts: dict[str, list[str]] = {}
    empty: list[str] = []
    for parent_sha, sha in commits:
        commit = _commit(repo, sha)
        parent = _commit(repo, parent_sha)
        index = repo.merge_trees(parent.tree, tip.tree, commit.tree)
        if index.conflicts is not None:
            conflicts[sha] = sorted({(e[1] or e[2] or e[0]).path for e in index.conflicts if any(e)})
            continue
        tree_id = index.write_tree(repo)
        if tree_id == tip.tree.id:
            empty.append(sha)
            continue
        new_id = write_commit(repo, tree_id, [tip.id], commit.message, commit.author, commit.committer)
        mapping[sha] = str(new_id)
        tip = _commit(repo, str(new_id))
    return Replayed(str(tip.id), mapping, conflicts, tuple(empty))


def squash(repo: pygit2.Repository, base: str, head: str, message: str, author: Person) -> str:
    """One commit with ``head``'s tree whose parent is ``base``."""
    tree = _commit(repo, head).tree
    return str(write_commit(repo, tree.id, [_commit(repo, base).id], message, author))
