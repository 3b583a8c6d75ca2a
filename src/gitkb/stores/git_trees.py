"""Trees in memory: list them as ``path -> blob sha`` maps, and build new ones without a checkout."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import pygit2

from gitkb.core.errors import InvalidArgument, NotFound
from gitkb.core.models import SkippedFile
from gitkb.core.paths import escape_name, unstorable_name

MODE_BLOB = 0o100644
MODE_EXEC = 0o100755
MODE_LINK = 0o120000
MODE_TREE = 0o040000
MODE_COMMIT = 0o160000  # a submodule (gitlink)
BLOB_MODES = frozenset({MODE_BLOB, MODE_EXEC})


class TreeMap(dict[str, str]):
    """``path -> blob sha`` of the regular files of a tree (paths relative to the repository root).

    Symlinks and submodules are not in the map; they are reported in
    ``symlinks`` and ``submodules`` so callers can say why a path is missing.
    Entries whose name cannot be stored (not valid UTF-8, or a control
    character; see ``gitkb.core.paths.unstorable_name``) are not in the map
    either: ``skipped`` lists them as ``SkippedFile(category="bad_name")`` with
    the path shown escaped (a folder ends with ``/`` and is not entered).
    """

    def __init__(
        self,
        entries: Mapping[str, str] | None = None,
        *,
        symlinks: tuple[str, ...] = (),
        submodules: tuple[str, ...] = (),
        skipped: tuple[SkippedFile, ...] = (),
    ) -> None:
        super().__init__(entries or {})
        self.symlinks = symlinks
        self.submodules = submodules
        self.skipped = skipped


def clean_under(under: str) -> str:
    under = (under or "").strip("/")
    return "" if under == "." else under


def walk_tree(repo: pygit2.Repository, tree: pygit2.Tree, under: str = "") -> TreeMap:
    """Every regular file below ``under`` (recursive). A missing ``under`` gives an empty map."""
    under = clean_under(under)
    links: list[str] = []
    subs: list[str] = []
    bad: list[SkippedFile] = []
    out: dict[str, str] = {}
    start = tree
    if under:
        check_tree_path(under)
        prefix = _symlink_prefix(repo, tree, under)
        if prefix is not None:
            return TreeMap(symlinks=(prefix,))
        try:
            entry = tree[under]
        except KeyError:
            return TreeMap()
        if entry.filemode != MODE_TREE:
            return TreeMap()
        start = subtree(repo, entry.id)
    stack: list[tuple[pygit2.Tree, str]] = [(start, f"{under}/" if under else "")]
    while stack:
        current, prefix = stack.pop()
        for item in current:
            mode = item.filemode
            path = prefix + str(item.name)
            problem = unstorable_name(str(item.name))
            if problem is not None:
                shown = escape_name(path) + ("/" if mode == MODE_TREE else "")
                bad.append(SkippedFile(shown, "bad_name", f"{problem}; it is shown escaped and was not read"))
                continue
            if mode in BLOB_MODES:
                out[path] = str(item.id)
            elif mode == MODE_TREE:
                stack.append((subtree(repo, item.id), path + "/"))
            elif mode == MODE_LINK:
                links.append(path)
            elif mode == MODE_COMMIT:
                subs.append(path)
    return TreeMap(
        out,
        symlinks=tuple(sorted(links)),
        submodules=tuple(sorted(subs)),
        skipped=tuple(sorted(bad, key=lambda s: s.path)),
    )


def subtree(repo: pygit2.Repository, oid: pygit2.Oid) -> pygit2.Tree:
    obj = repo[oid]
    if not isinstance(obj, pygit2.Tree):  # pragma: no cover - a corrupt repository
        raise NotFound(f"{oid} is not a tree")
    return obj


def check_tree_path(path: str) -> None:
    """A store-level sanity check on a repository path (proposal rules live in core.paths)."""
    if not path or path.startswith("/") or path.endswith("/"):
        raise InvalidArgument(f"invalid repository path {path!r}")
    for seg in path.split("/"):
        if seg in ("", ".", "..") or "\x00" in seg or "\\" in seg or seg.casefold().rstrip(". ") == ".git":
            raise InvalidArgument(f"invalid repository path {path!r}")


def _symlink_prefix(repo: pygit2.Repository, tree: pygit2.Tree, path: str) -> str | None:
    """The first prefix of ``path`` (the path itself included) that is a symlink entry, if any."""
    parts = path.split("/")
    current = tree
    for i, seg in enumerate(parts):
        if seg not in current:
            return None
        entry = current[seg]
        if entry.filemode == MODE_LINK:
            return "/".join(parts[: i + 1])
        if i < len(parts) - 1:
            if entry.filemode != MODE_TREE:
                return None
            current = subtree(repo, entry.id)
    return None


def is_symlink_path(repo: pygit2.Repository, tree: pygit2.Tree, path: str) -> bool:
    """True when ``path`` or any of its parent folders is a symlink in ``tree``."""
    return _symlink_prefix(repo, tree, path.strip("/")) is not None


@dataclass(frozen=True)
class _Put:
    blob: pygit2.Oid
    mode: int


Edit = _Put | None  # None = delete


def plan_edits(
    repo: pygit2.Repository,
    tree: pygit2.Tree,
    changes: Mapping[str, bytes | None],
    renames: Mapping[str, str],
) -> dict[str, Edit]:
    """Check changes and renames against ``tree``; return the per-path edits (blobs written)."""
    edits: dict[str, Edit] = {}
    for path in (*changes, *renames, *renames.values()):
        check_tree_path(path)
        link = _symlink_prefix(repo, tree, path)
        if link is not None:
            raise InvalidArgument(
                f"{path!r} goes through the symlink {link!r}; gitkb does not edit through symlinks"
            )

    if len(set(renames.values())) != len(renames):
        raise InvalidArgument("two renames have the same target")
    moved: dict[str, _Put] = {}
    for old, new in renames.items():
        old_entry = _blob_entry(tree, old)
        if old_entry is None:
            raise NotFound(f"cannot rename {old!r}: no such file in the base commit")
        if old == new:
            raise InvalidArgument(f"cannot rename {old!r} to itself")
        if changes.get(old) is not None and old not in renames.values():
            raise InvalidArgument(f"{old!r} is renamed away and also given new content")
        target_freed = new in renames or (new in changes and changes[new] is None)
        if _blob_entry(tree, new) is not None and not target_freed:
            raise InvalidArgument(f"cannot rename {old!r} to {new!r}: the target exists")
        moved[new] = _Put(old_entry.id, old_entry.filemode)
        edits[old] = None
    edits.update(moved)

    for path, content in changes.items():
        entry = _blob_entry(tree, path)
        if content is None:
            if path in moved:
                raise InvalidArgument(f"{path!r} is both a rename target and deleted")
            if entry is None:
                raise NotFound(f"cannot delete {path!r}: no such file in the base commit")
            edits[path] = None
            continue
        if not isinstance(content, bytes | bytearray | memoryview):
            raise InvalidArgument(f"content for {path!r} must be bytes")
        existing_mode = entry.filemode if entry is not None else MODE_BLOB
        mode = moved[path].mode if path in moved else existing_mode
        edits[path] = _Put(repo.create_blob(bytes(content)), mode)
    return edits


def _blob_entry(tree: pygit2.Tree, path: str) -> pygit2.Object | None:
    try:
        entry = tree[path]
    except KeyError:
        return None
    return entry if entry.filemode in BLOB_MODES else None


def build_tree(
    repo: pygit2.Repository, base: pygit2.Tree | None, edits: Mapping[str, Edit], _prefix: str = ""
) -> pygit2.Oid | None:
    """Apply ``edits`` to ``base`` touching only the folders on their paths; ``None`` for an empty tree."""
    direct: dict[str, Edit] = {}
    nested: dict[str, dict[str, Edit]] = defaultdict(dict)
    for path, edit in edits.items():
        head, sep, rest = path.partition("/")
        if sep:
            nested[head][rest] = edit
        else:
            direct[head] = edit
    builder = repo.TreeBuilder(base) if base is not None else repo.TreeBuilder()
    for name, edit in direct.items():
        existing = builder.get(name)
        full = _prefix + name
        if edit is None:
            if existing is not None:
                builder.remove(name)
            continue
        if name in nested:
            raise InvalidArgument(f"{full!r} cannot be both a file and a folder")
        if existing is not None and existing.filemode == MODE_TREE:
            raise InvalidArgument(f"{full!r} is a folder, not a file")
        builder.insert(name, edit.blob, edit.mode)
    for name, sub_edits in nested.items():
        existing = builder.get(name)
        sub_base: pygit2.Tree | None = None
        if existing is not None:
            if existing.filemode != MODE_TREE:
                raise InvalidArgument(f"{_prefix + name!r} is a file, so nothing can be placed under it")
            sub_base = subtree(repo, existing.id)
        sub_oid = build_tree(repo, sub_base, sub_edits, f"{_prefix}{name}/")
        if sub_oid is None:
            if existing is not None:
                builder.remove(name)
        else:
            builder.insert(name, sub_oid, MODE_TREE)
    if len(builder) == 0:
        return None
    return builder.write()
