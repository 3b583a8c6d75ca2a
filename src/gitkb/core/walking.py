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

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import pathspec

from gitkb.core.dir_walker import DirWalker, too_large_detail
from gitkb.core.errors import InvalidArgument, NotFound
from gitkb.core.exclusions import (
    BUILTIN_EXCLUDES,
    describe_pattern,
    exclude_spec,
    include_spec,
    matched_pattern,
)
from gitkb.core.models import SkippedFile, WalkEntry
from gitkb.core.paths import escape_name, unstorable_name

DEFAULT_MAX_BYTES = 10 * 1024 * 1024


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
    excl = exclude_spec(tuple(BUILTIN_EXCLUDES), tuple(exclude))
    incl = include_spec(tuple(include))

    bad = next((problem for seg in target_path.parts if (problem := unstorable_name(seg))), None)
    if bad is not None:  # documents record where they came from: the target's own path must be storable
        raise InvalidArgument(
            f"cannot add {escape_name(str(target_path))}: {bad} (a name in the path itself); nothing was indexed",
            next_steps=["rename the file or folder, or add a folder below it"],
            details={"path": escape_name(str(target_path)), "reason": "bad_name"},
        )
    if target_path.is_dir():
        walker = DirWalker(target_path, prefix, max_bytes, excl, incl)
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
        index = matched_pattern(excl, judged)
        if index is not None:
            raise InvalidArgument(
                f"{escape_name(str(path))} is excluded by {describe_pattern(excl, index)}; nothing was indexed",
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
            yield SkippedFile(stored, "too_large", too_large_detail(size, max_bytes))
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
