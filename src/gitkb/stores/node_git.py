"""A staged proposal commit written down so any node can make it again: what it changes (every path it
touches, with the whole new content, or deleted), its message, author and committer with their times.

``commit_spec`` reads that from a commit and its parent; ``rebuild_commit`` writes the commit again on
the same parent. Same tree, parent, message and signatures: the same sha, which the caller checks.
"""

from __future__ import annotations

import base64
from typing import Any

import pygit2

from gitkb.core.errors import InvalidArgument
from gitkb.stores.git_commits import write_commit
from gitkb.stores.git_trees import build_tree, plan_edits


def _sig(s: pygit2.Signature) -> list[Any]:
    return [s.name, s.email, int(s.time), int(s.offset)]


def _commit(repo: pygit2.Repository, sha: str) -> pygit2.Commit:
    obj = repo.get(sha)
    if not isinstance(obj, pygit2.Commit):
        raise InvalidArgument(f"{sha[:12]} is not a commit of this clone")
    return obj


def has_commit(repo: pygit2.Repository, sha: str) -> bool:
    try:
        return isinstance(repo.get(sha), pygit2.Commit)
    except (ValueError, KeyError):
        return False


def commit_spec(repo: pygit2.Repository, parent: str, commit: str) -> dict[str, Any]:
    """What ``commit`` changes against ``parent``, with its message and signatures (JSON-ready)."""
    old, new = _commit(repo, parent), _commit(repo, commit)
    changes: dict[str, str | None] = {}
    for delta in old.tree.diff_to_tree(new.tree).deltas:
        if delta.status == pygit2.enums.DeltaStatus.DELETED:
            changes[delta.old_file.path] = None
            continue
        if delta.old_file.path != delta.new_file.path:  # no rename detection asked: never, but be exact
            changes[delta.old_file.path] = None
        blob = repo.get(delta.new_file.id)
        assert isinstance(blob, pygit2.Blob)
        changes[delta.new_file.path] = base64.b64encode(blob.data).decode("ascii")
    return {
        "message": new.message,
        "author": _sig(new.author),
        "committer": _sig(new.committer),
        "changes": changes,
    }


def rebuild_commit(repo: pygit2.Repository, parent: str, spec: dict[str, Any]) -> str:
    """Write the commit ``spec`` describes on ``parent`` (no ref moves); returns its sha."""
    base = _commit(repo, parent)
    changes = {
        path: None if data is None else base64.b64decode(data) for path, data in dict(spec["changes"]).items()
    }
    edits = plan_edits(repo, base.tree, changes, {})
    tree = build_tree(repo, base.tree, edits)
    if tree is None:
        raise InvalidArgument("a staged proposal cannot leave the tree empty")
    author = pygit2.Signature(*spec["author"])
    committer = pygit2.Signature(*spec["committer"])
    return str(write_commit(repo, tree, [base.id], str(spec["message"]), author, committer))
