"""What a walk leaves out: gitignore-style exclude and include patterns, and the sidecar files.

Patterns match whole path segments or file names, never substrings (the rules are in
:mod:`gitkb.core.walking`). No I/O here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import pathspec

from gitkb.core.errors import InvalidArgument

BUILTIN_EXCLUDES = ["__pycache__", "node_modules", ".git", "*.o", "target", "build", "dist"]
# Files that configure ingestion (gitkb.services.changes.sources.sidecars): walks leave them out as "sidecar".
SIDECAR_FILES = ("gitkb.yml", "kb-manifest.json")


def is_sidecar(rel_path: str) -> bool:
    """True when the file name of ``rel_path`` is one of the sidecars (at any depth)."""
    return rel_path.rsplit("/", 1)[-1] in SIDECAR_FILES


@functools.lru_cache(maxsize=64)
def exclude_spec(builtins: tuple[str, ...], extra: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    lines = [*builtins, *extra]
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except Exception as exc:  # pathspec raises its own error types (and ValueError)
        raise InvalidArgument(f"invalid exclude pattern: {exc}") from exc


@functools.lru_cache(maxsize=64)
def include_spec(include: tuple[str, ...]) -> pathspec.GitIgnoreSpec | None:
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


def describe_pattern(spec: pathspec.GitIgnoreSpec, index: int) -> str:
    pattern = getattr(spec.patterns[index], "pattern", None)
    kind = "built-in" if index < len(BUILTIN_EXCLUDES) else "exclude"
    return f"the {kind} pattern {str(pattern)!r}"


def matched_pattern(spec: pathspec.GitIgnoreSpec, rel_path: str) -> int | None:
    result = spec.check_file(rel_path)
    if result.include and result.index is not None:
        return result.index
    return None


class Excluder:
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
        return matched_pattern(self.spec, rel)


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
    spec = exclude_spec(tuple(BUILTIN_EXCLUDES), tuple(extra_excludes))
    index = matched_pattern(spec, _normalize(rel_path))
    return None if index is None else describe_pattern(spec, index)


def is_excluded(rel_path: str, extra_excludes: Sequence[str] = ()) -> bool:
    """True when a built-in or extra pattern excludes ``rel_path`` (any segment)."""
    return excluded_by(rel_path, extra_excludes) is not None
