"""Plan the file changes between two trees: added, modified, deleted, renamed.

Pure and I/O-free. Input is two ``path -> blob sha`` maps (as produced by
``ManagedRepo.tree_map``); output is a :class:`ChangePlan`.

A *rename* is exactly a deleted path and an added path that carry the same
blob (git's exact-rename detection; no similarity scoring). When several
deleted and added paths share one blob, the pairing is deterministic:
first paths with the same file name are paired (sorted by path), then the
rest are paired in sorted order. Leftovers stay plain deletions/additions.

Only paths present in one map and not the other can be renames: a path that
exists in both maps with a different blob is *modified*, never part of a
rename, so the buckets never overlap.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypedDict

Status = Literal["A", "M", "D", "R"]


class ChangedFile(TypedDict, total=False):
    path: str
    status: Status
    old_path: str


@dataclass(frozen=True)
class ChangePlan:
    """What changed between two trees. Every tuple is sorted; renames by new path."""

    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()  # (old_path, new_path)

    @property
    def is_empty(self) -> bool:
        return not (self.added or self.modified or self.deleted or self.renamed)

    def __len__(self) -> int:
        return len(self.added) + len(self.modified) + len(self.deleted) + len(self.renamed)

    @property
    def paths_to_load(self) -> tuple[str, ...]:
        """Paths whose content must be (re)read from the new tree: added, modified, rename targets."""
        return tuple(sorted((*self.added, *self.modified, *(new for _, new in self.renamed))))

    @property
    def paths_gone(self) -> tuple[str, ...]:
        """Paths that no longer exist in the new tree: deleted and rename sources."""
        return tuple(sorted((*self.deleted, *(old for old, _ in self.renamed))))


def plan_changes(old: Mapping[str, str], new: Mapping[str, str]) -> ChangePlan:
    """Compare two ``path -> blob sha`` maps.

    ``plan_changes(a, a)`` is empty; applying the plan to ``old`` (see
    :func:`apply_plan`) gives ``new``.
    """
    deleted = {p for p in old if p not in new}
    added = {p for p in new if p not in old}
    modified = sorted(p for p in old if p in new and old[p] != new[p])

    deleted_by_blob: dict[str, list[str]] = defaultdict(list)
    for p in deleted:
        deleted_by_blob[old[p]].append(p)
    added_by_blob: dict[str, list[str]] = defaultdict(list)
    for p in added:
        added_by_blob[new[p]].append(p)

    renamed: list[tuple[str, str]] = []
    for blob in sorted(deleted_by_blob.keys() & added_by_blob.keys()):
        for old_path, new_path in _pair(sorted(deleted_by_blob[blob]), sorted(added_by_blob[blob])):
            renamed.append((old_path, new_path))
            deleted.discard(old_path)
            added.discard(new_path)

    return ChangePlan(
        added=tuple(sorted(added)),
        modified=tuple(modified),
        deleted=tuple(sorted(deleted)),
        renamed=tuple(sorted(renamed, key=lambda pair: (pair[1], pair[0]))),
    )


def _pair(olds: list[str], news: list[str]) -> list[tuple[str, str]]:
    """Pair sorted candidate lists: same file name first, then in sorted order."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for n in reversed(news):  # reversed so that pop() yields the smallest path first
        by_name[posixpath.basename(n)].append(n)
    pairs: list[tuple[str, str]] = []
    used: set[str] = set()
    rest_old: list[str] = []
    for o in olds:
        candidates = by_name.get(posixpath.basename(o))
        if candidates:
            n = candidates.pop()
            used.add(n)
            pairs.append((o, n))
        else:
            rest_old.append(o)
    rest_new = [n for n in news if n not in used]
    pairs.extend(zip(rest_old, rest_new, strict=False))
    return pairs


def apply_plan(old: Mapping[str, str], plan: ChangePlan, new_blobs: Mapping[str, str]) -> dict[str, str]:
    """Replay ``plan`` on ``old``; contents of added/modified paths come from ``new_blobs``.

    Renamed paths keep their blob. Useful to check a plan, and for tests.
    """
    out = dict(old)
    for p in plan.deleted:
        del out[p]
    for old_path, new_path in plan.renamed:
        out[new_path] = out.pop(old_path)
    for p in (*plan.added, *plan.modified):
        out[p] = new_blobs[p]
    return out


def changed_files(plan: ChangePlan) -> list[ChangedFile]:
    """The forge-facing list: ``{path, status: A|M|D|R, old_path?}``, sorted by path."""
    out: list[ChangedFile] = []
    out.extend({"path": p, "status": "A"} for p in plan.added)
    out.extend({"path": p, "status": "M"} for p in plan.modified)
    out.extend({"path": p, "status": "D"} for p in plan.deleted)
    out.extend({"path": new, "status": "R", "old_path": old} for old, new in plan.renamed)
    out.sort(key=lambda f: (f["path"], f["status"]))
    return out
