"""Walk a file or a directory for ingestion.

``walk`` yields a ``WalkEntry`` for every file to load and a ``SkippedFile``
for everything it leaves out on purpose (excluded, too large, a symlink that
leaves the walked root). It reads no file contents; ``gitkb.core.loading``
does that.

Rules (stable; the ingest layer and sync rely on them):

* **Stored paths** are ``/``-separated and relative to ``base``. By default the
  base is the target's parent, so walking ``/x/docs`` stores
  ``docs/ops/rotate.md`` and walking the file ``/x/docs/a.md`` stores ``a.md``.
  An explicit ``base`` must contain the target (a directory target may equal
  it, then paths are relative to the directory itself).
* **Exclusions** are gitignore-style patterns (``pathspec``): the built-in ones
  (``BUILTIN_EXCLUDES``) plus the caller's ``exclude``. They match whole path
  segments or file names, never substrings: ``distance.md``, ``builder/x.md``
  and ``05-dual-targeting.md`` are kept; ``target/x``, ``a/build/y.md``,
  ``x.o`` are not. Patterns are matched against the path *relative to the
  walked directory* (the target), so the target's own name and the names
  above it never count: walking a directory literally named ``build`` walks
  it. For a single-file target the pattern is matched against its stored path
  and its path from the current directory (see below); an excluded file
  target raises ``InvalidArgument`` (nothing is indexed) instead of being
  skipped silently.
* Excluded directories are pruned without being read and reported as one
  ``SkippedFile(category="excluded")``. A ``SkippedFile`` path that names a
  directory always ends with ``/``.
* ``include`` (gitignore-style, relative to the walked directory) narrows the
  walk to matching files; files it leaves out are omitted silently (they were
  never asked for). Empty ``include`` means every file.
* **Symlinks** are never followed out of the walked root: one whose resolved
  path lies outside is reported as excluded ("symlink leads outside ...").
  Symlinks inside the root are followed; a directory symlink is followed at
  most once per walk and never into one of its own ancestors (no loops). A
  single-file target that is itself a symlink is followed (it was named).
* Files larger than ``max_bytes`` are reported as ``too_large``; anything that
  is not a regular file or directory (sockets, FIFOs, devices) as
  ``special_file``; broken links as ``excluded``.
* **Nothing one entry does stops the rest.** The walk is iterative (an
  explicit stack, no recursion). A name that is not valid UTF-8 or holds a
  control character is ``bad_name`` (the path shown escaped with
  ``gitkb.core.paths.escape_name``, ``\\xff`` for an undecodable byte; a folder
  is not entered); a folder more than ``MAX_DEPTH`` (100) levels below the
  walked directory is ``too_deep``; a folder that cannot be listed, or an
  entry that cannot be stat'ed or vanished mid-walk, is ``unreadable``.
* The **target itself** (its absolute path, folders above included) must be
  storable: one with such a name raises ``InvalidArgument``.
* An **explicitly named file** (a single-file target) is judged by the
  exclusions on its stored path and, when it lies below the current
  directory (unless that is ``/``), on its path from there:
  ``docs/node_modules/a.md`` raises ``InvalidArgument`` and nothing is indexed.
* Order is deterministic: entries of each directory sorted by name, depth
  first (equal to sorting stored paths segment by segment).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pathspec

from gitkb.core.errors import InvalidArgument, NotFound
from gitkb.core.models import SkippedFile
from gitkb.core.paths import escape_name, unstorable_name

BUILTIN_EXCLUDES = ["__pycache__", "node_modules", ".git", "*.o", "target", "build", "dist"]
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
MAX_DEPTH = 100  # folders below the walked directory; deeper ones are skipped as too_deep
# Files that configure ingestion (gitkb.services.changes.sources.sidecars): walks leave them out as "sidecar".
SIDECAR_FILES = ("gitkb.yml", "kb-manifest.json")


def is_sidecar(rel_path: str) -> bool:
    """True when the file name of ``rel_path`` is one of the sidecars (at any depth)."""
    return rel_path.rsplit("/", 1)[-1] in SIDECAR_FILES


@dataclass(frozen=True)
class WalkEntry:
    """A file to load: where it is, and the path it is stored under."""

    abs_path: Path
    rel_path: str  # '/'-separated stored path


# --------------------------------------------------------------------------- paths


def _lexical_relative(path: Path, base: Path) -> str | None:
    try:
        rel = path.relative_to(base)
    except ValueError:
        return None
    return rel.as_posix()


def _relative(path: Path, base: Path) -> str | None:
    """``path`` relative to ``base`` ('/'-separated), lexically or else after
    resolving symlinks on both sides; ``None`` when it is not inside."""
    path = Path(os.path.abspath(path))
    base = Path(os.path.abspath(base))
    rel = _lexical_relative(path, base)
    if rel is None:
        rel = _lexical_relative(path.resolve(), base.resolve())
    return rel


def stored_path(abs_path: Path, base: Path) -> str:
    """The '/'-separated path ``abs_path`` is stored under, relative to ``base``.

    Raises ``InvalidArgument`` when ``abs_path`` is not strictly inside ``base``.
    """
    rel = _relative(abs_path, base)
    if rel is None or rel == ".":
        raise InvalidArgument(
            f"{abs_path} is not inside the base directory {base}",
            next_steps=["pass a base directory that contains the path"],
        )
    return rel


def _join(prefix: str, rel: str) -> str:
    if not prefix:
        return rel
    return f"{prefix}/{rel}"


# --------------------------------------------------------------------------- patterns


@functools.lru_cache(maxsize=64)
def _exclude_spec(builtins: tuple[str, ...], extra: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    lines = [*builtins, *extra]
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except Exception as exc:  # pathspec raises its own error types (and ValueError)
        raise InvalidArgument(f"invalid exclude pattern: {exc}") from exc


@functools.lru_cache(maxsize=64)
def _include_spec(include: tuple[str, ...]) -> pathspec.GitIgnoreSpec | None:
    lines = [p for p in include if p.strip()]
    if not lines:
        return None
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except Exception as exc:
        raise InvalidArgument(f"invalid include pattern: {exc}") from exc


def _normalize(rel_path: str) -> str:
    rel = rel_path.replace("\\", "/")
    while rel.startswith("./"):
        rel = rel[2:]
    return rel.lstrip("/")


def _describe(spec: pathspec.GitIgnoreSpec, index: int) -> str:
    pattern = getattr(spec.patterns[index], "pattern", None)
    kind = "built-in" if index < len(BUILTIN_EXCLUDES) else "exclude"
    return f"the {kind} pattern {str(pattern)!r}"


def _match(spec: pathspec.GitIgnoreSpec, rel_path: str) -> int | None:
    result = spec.check_file(rel_path)
    if result.include and result.index is not None:
        return result.index
    return None


class _Excluder:
    """Exclusion checks during a walk, fast for the common "kept" case.

    Negated patterns can only re-include, so a path that no positive pattern
    matches is kept: one combined regex answers that; pathspec decides the
    rest (and names the pattern).
    """

    def __init__(self, spec: pathspec.GitIgnoreSpec) -> None:
        self.spec = spec
        self.prefilter = _combined_positive_regex(spec)

    def check(self, rel: str) -> int | None:
        """``rel`` ends with ``/`` for a directory."""
        if self.prefilter is not None and self.prefilter.search(rel) is None:
            return None
        return _match(self.spec, rel)


def _combined_positive_regex(spec: pathspec.GitIgnoreSpec) -> re.Pattern[str] | None:
    parts: list[str] = []
    for pattern in spec.patterns:
        if not pattern.include:
            continue
        regex = getattr(pattern, "regex", None)
        source = getattr(regex, "pattern", None)
        if not isinstance(source, str):
            return None  # unknown pattern shape: no shortcut
        parts.append("(?:" + re.sub(r"\(\?P<[^>]+>", "(?:", source) + ")")
    if not parts:
        return re.compile(r"(?!)")
    try:
        return re.compile("|".join(parts))
    except re.error:
        return None


def excluded_by(rel_path: str, extra_excludes: Sequence[str] = ()) -> str | None:
    """Which pattern excludes ``rel_path``, as ``"the built-in pattern 'build'"``
    or ``"the exclude pattern 'x'"``; ``None`` when it is kept.

    ``rel_path`` is relative to the walked directory; a trailing ``/`` marks a
    directory (so directory-only patterns such as ``out/`` apply).
    """
    spec = _exclude_spec(tuple(BUILTIN_EXCLUDES), tuple(extra_excludes))
    index = _match(spec, _normalize(rel_path))
    return None if index is None else _describe(spec, index)


def is_excluded(rel_path: str, extra_excludes: Sequence[str] = ()) -> bool:
    """True when a built-in or extra pattern excludes ``rel_path`` (any segment)."""
    return excluded_by(rel_path, extra_excludes) is not None


# --------------------------------------------------------------------------- walk


def walk(
    target: Path,
    *,
    base: Path | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> Iterator[WalkEntry | SkippedFile]:
    """Yield the files under ``target`` (a directory or a single file).

    Argument errors are raised at call time, not on the first ``next()``:
    ``NotFound`` for a missing target, ``InvalidArgument`` for a target outside
    ``base``, a bad pattern, or a single-file target that is excluded.
    """
    target_path = Path(os.path.abspath(target))
    if not os.path.lexists(target_path):
        raise NotFound(f"path not found: {target}", next_steps=["check the path and try again"])
    if not target_path.exists():
        raise NotFound(f"path not found: {target} is a broken symlink")
    if max_bytes <= 0:
        raise InvalidArgument(f"max_bytes must be positive, got {max_bytes}")
    base_path = Path(os.path.abspath(base)) if base is not None else target_path.parent
    prefix = _relative(target_path, base_path)
    if prefix is None:
        raise InvalidArgument(
            f"{target} is not inside the base directory {base_path}",
            next_steps=["pass a base directory that contains the path"],
        )
    if prefix == ".":
        prefix = ""
    excl = _exclude_spec(tuple(BUILTIN_EXCLUDES), tuple(exclude))
    incl = _include_spec(tuple(include))

    bad = next((problem for seg in target_path.parts if (problem := unstorable_name(seg))), None)
    if bad is not None:  # documents record where they came from: the target's own path must be storable
        raise InvalidArgument(
            f"cannot add {escape_name(str(target_path))}: {bad} (a name in the path itself); nothing was indexed",
            next_steps=["rename the file or folder, or add a folder below it"],
            details={"path": escape_name(str(target_path)), "reason": "bad_name"},
        )
    if target_path.is_dir():
        walker = _DirWalker(target_path, prefix, max_bytes, excl, incl)
        return walker.walk()
    if not target_path.is_file():
        raise InvalidArgument(f"{target} is neither a regular file nor a directory")
    if not prefix:
        raise InvalidArgument(f"{target} is a file; the base must be a directory above it")
    return _walk_file(target_path, prefix, max_bytes, excl, incl)


def _walk_file(
    path: Path,
    stored: str,
    max_bytes: int,
    excl: pathspec.GitIgnoreSpec,
    incl: pathspec.GitIgnoreSpec | None,
) -> Iterator[WalkEntry | SkippedFile]:
    for judged in _named_forms(path, stored):
        index = _match(excl, judged)
        if index is not None:
            raise InvalidArgument(
                f"{escape_name(str(path))} is excluded by {_describe(excl, index)}; nothing was indexed",
                next_steps=["move the file out of the excluded folder or rename it"],
                details={"path": escape_name(str(path))},
            )
    if incl is not None and not incl.match_file(path.name):
        raise InvalidArgument(
            f"{path} does not match the include patterns; nothing was indexed",
            details={"path": str(path)},
        )
    size = path.stat().st_size

    def _one() -> Iterator[WalkEntry | SkippedFile]:
        if size > max_bytes:
            yield SkippedFile(stored, "too_large", _too_large(size, max_bytes))
        else:
            yield WalkEntry(path, stored)

    return _one()


def _named_forms(path: Path, stored: str) -> list[str]:
    """The spellings of a single-file target that exclusions judge: its stored path and,
    when it lies below the current directory, its path from there."""
    forms = [stored]
    try:
        cwd = Path(os.path.abspath(os.getcwd()))
    except OSError:  # the current directory was removed
        return forms
    if cwd == Path(cwd.anchor):  # a service started in "/" would judge every folder of every path
        return forms
    rel = _lexical_relative(path, cwd)
    if rel is not None and rel != stored:
        forms.append(rel)
    return forms


def _too_large(size: int, max_bytes: int) -> str:
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


class _DirWalker:
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
        self.excluder = _Excluder(excl)
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
                        rel + "/", "excluded", f"directory excluded by {_describe(self.excl, index)}"
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
                return self._skip(rel, "excluded", f"excluded by {_describe(self.excl, index)}")
            size = entry.stat().st_size
            if size > self.max_bytes:
                return self._skip(rel, "too_large", _too_large(size, self.max_bytes))
            return WalkEntry(frame.path / name, _join(self.prefix, rel))
        except OSError as exc:  # vanished or unreadable between scandir and stat
            shown = escape_name(rel)
            if isinstance(exc, FileNotFoundError):
                return self._skip(shown, "unreadable", "vanished while the folder was walked")
            return self._skip(shown, "unreadable", f"cannot stat: {exc.strerror or exc}")
