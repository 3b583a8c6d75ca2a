"""The directory half of a walk: depth first over an explicit stack, every entry judged once.

The rules (symlinks, depth, bad names, sizes, exclusions) are in :mod:`gitkb.core.walking`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

from gitkb.core.exclusions import Excluder, describe_pattern
from gitkb.core.models import SkippedFile, WalkEntry
from gitkb.core.paths import escape_name, unstorable_name

MAX_DEPTH = 100  # folders below the walked directory; deeper ones are skipped as too_deep


def _join(prefix: str, rel: str) -> str:
    if not prefix:
        return rel
    return f"{prefix}/{rel}"


def too_large_detail(size: int, max_bytes: int) -> str:
    return f"{size} bytes exceeds the limit of {max_bytes} bytes"


def _inside(real: str, root_real: str) -> bool:
    if real == root_real:
        return True
    root = root_real if root_real.endswith(os.sep) else root_real + os.sep
    return real.startswith(root)


@dataclass
class _Frame:
    """One directory being listed: its entries and where the walk is in them."""

    path: Path
    rel: str  # relative to the walked directory, "" for the root
    real: str
    ancestors: frozenset[str]
    entries: Iterator[os.DirEntry[str]]
    depth: int


class DirWalker:
    """Depth-first over an explicit stack (no recursion, so no depth makes it fail)."""

    def __init__(
        self,
        root: Path,
        prefix: str,
        max_bytes: int,
        excl: pathspec.GitIgnoreSpec,
        incl: pathspec.GitIgnoreSpec | None,
        max_depth: int = MAX_DEPTH,
    ) -> None:
        self.root = root
        self.root_real = os.path.realpath(root)
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.max_depth = max_depth
        self.excl = excl
        self.excluder = Excluder(excl)
        self.incl = incl
        self.followed: set[str] = set()  # real dirs entered through a symlink

    def walk(self) -> Iterator[WalkEntry | SkippedFile]:
        stack: list[_Frame] = []
        first = self._open(self.root, "", self.root_real, frozenset((self.root_real,)), 0)
        if isinstance(first, SkippedFile):
            yield first
            return
        stack.append(first)
        while stack:
            frame = stack[-1]
            entry = next(frame.entries, None)
            if entry is None:
                stack.pop()
                continue
            result = self._entry(frame, entry)
            if isinstance(result, _Frame):
                stack.append(result)
            elif result is not None:
                yield result

    def _skip(self, rel: str, category: str, detail: str) -> SkippedFile:
        return SkippedFile(_join(self.prefix, rel), category, detail)

    def _open(
        self, dir_path: Path, rel_dir: str, real_dir: str, ancestors: frozenset[str], depth: int
    ) -> _Frame | SkippedFile:
        try:
            with os.scandir(dir_path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            return self._skip(rel_dir + "/", "unreadable", f"cannot list directory: {exc.strerror or exc}")
        return _Frame(dir_path, rel_dir, real_dir, ancestors, iter(entries), depth)

    def _entry(self, frame: _Frame, entry: os.DirEntry[str]) -> _Frame | WalkEntry | SkippedFile | None:
        name = entry.name
        rel_dir = frame.rel
        rel = f"{rel_dir}/{name}" if rel_dir else name
        try:
            problem = unstorable_name(name)
            is_dir = entry.is_dir()  # follows a symlink
            if problem is not None:
                shown = escape_name(rel) + ("/" if is_dir else "")
                return self._skip(shown, "bad_name", f"{problem}; it is shown escaped and was not read")
            is_link = entry.is_symlink()
            real = os.path.realpath(entry.path) if is_link else ""
            if is_link:
                if not _inside(real, self.root_real):
                    shown = rel + "/" if os.path.isdir(real) else rel
                    return self._skip(
                        shown, "excluded", f"symlink leads outside {self.root}: {escape_name(real)}"
                    )
                if not os.path.exists(real):
                    return self._skip(rel, "excluded", f"broken symlink to {escape_name(real)}")
            if is_dir:
                index = self.excluder.check(rel + "/")
                if index is not None:
                    return self._skip(
                        rel + "/", "excluded", f"directory excluded by {describe_pattern(self.excl, index)}"
                    )
                if frame.depth + 1 > self.max_depth:
                    detail = f"more than {self.max_depth} folders deep; the walk does not go further"
                    return self._skip(rel + "/", "too_deep", detail)
                if not is_link:
                    real = os.path.join(frame.real, name)
                elif real in frame.ancestors:
                    return self._skip(
                        rel + "/", "excluded", f"symlink loop: leads back to {escape_name(real)}"
                    )
                elif real in self.followed:
                    detail = f"symlink to {escape_name(real)}, already walked through another link"
                    return self._skip(rel + "/", "excluded", detail)
                else:
                    self.followed.add(real)
                return self._open(frame.path / name, rel, real, frame.ancestors | {real}, frame.depth + 1)
            if not entry.is_file():
                if not os.path.lexists(entry.path):
                    return self._skip(rel, "unreadable", "vanished while the folder was walked")
                return self._skip(rel, "special_file", "not a regular file")
            if self.incl is not None and not self.incl.match_file(rel):
                return None
            index = self.excluder.check(rel)
            if index is not None:
                return self._skip(rel, "excluded", f"excluded by {describe_pattern(self.excl, index)}")
            size = entry.stat().st_size
            if size > self.max_bytes:
                return self._skip(rel, "too_large", too_large_detail(size, self.max_bytes))
            return WalkEntry(frame.path / name, _join(self.prefix, rel))
        except OSError as exc:  # vanished or unreadable between scandir and stat
            shown = escape_name(rel)
            if isinstance(exc, FileNotFoundError):
                return self._skip(shown, "unreadable", "vanished while the folder was walked")
            return self._skip(shown, "unreadable", f"cannot stat: {exc.strerror or exc}")
