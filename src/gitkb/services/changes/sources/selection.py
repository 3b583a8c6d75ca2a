"""Which files of a source feed its indexes, and how: the effective configuration.

Precedence, later winning: ``kb-manifest.json``, ``gitkb.yml``, the flags
given to ``source add``. Globs are gitignore-style and relative to the
documents root; the built-in exclusions (``node_modules``, ``.git``, ...)
always apply; the sidecars themselves are configuration, never documents.
Pure: no I/O.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pathspec

from gitkb.core.errors import InvalidArgument
from gitkb.core.exclusions import is_excluded, is_sidecar
from gitkb.services.changes.sources.sidecars import SCHEMA_FILES, Sidecars


@functools.lru_cache(maxsize=64)
def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec | None:
    if not patterns:
        return None
    try:
        return pathspec.GitIgnoreSpec.from_lines(patterns)
    except Exception as exc:  # pathspec raises its own error types
        raise InvalidArgument(f"invalid glob in {list(patterns)}: {exc}") from exc


@dataclass(frozen=True)
class EffectiveConfig:
    documents_root: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    required_frontmatter: tuple[str, ...] = ()
    chunk_strategy: str | None = None
    chunk_size: int | None = None
    chunk_overlap: int | None = None

    def key(self) -> str:
        """Changes whenever the set of files or the way they are read may change."""
        blob = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def prefix(self) -> str:
        root = self.documents_root.strip("/")
        return f"{root}/" if root else ""

    def relative(self, path: str) -> str | None:
        """``path`` relative to the documents root, or None when it is outside."""
        if not path.startswith(self.prefix):
            return None
        return path[len(self.prefix) :]

    def selects(self, path: str) -> bool:
        """True when the repository path ``path`` feeds the indexes."""
        rel = self.relative(path)
        if not rel or rel in SCHEMA_FILES or is_sidecar(rel):  # configuration at any depth, as walks do
            return False
        if is_excluded(rel, self.exclude):
            return False
        inc = _spec(self.include)
        return inc is None or inc.match_file(rel)

    def select(self, tree: Mapping[str, str]) -> dict[str, str]:
        return {p: b for p, b in tree.items() if self.selects(p)}


def _strings(value: Any) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(str(v) for v in value)


def effective_config(flags: Mapping[str, Any], documents_root: str, sidecars: Sidecars) -> EffectiveConfig:
    """Merge the sidecars with the flags stored on the source (flags win)."""
    chunking = sidecars.gitkb.get("chunking") or {}
    cfg = EffectiveConfig(
        documents_root=documents_root.strip("/"),
        include=_strings(flags.get("include")) or _strings(sidecars.setting("include")),
        exclude=_strings(flags.get("exclude")) or _strings(sidecars.setting("exclude")),
        required_frontmatter=_strings(flags.get("required_frontmatter"))
        or _strings(sidecars.setting("required_frontmatter")),
        chunk_strategy=chunking.get("strategy"),
        chunk_size=chunking.get("size"),
        chunk_overlap=chunking.get("overlap"),
    )
    _spec(cfg.include)
    _spec(cfg.exclude)
    return cfg


def check_globs(patterns: Sequence[str], what: str) -> tuple[str, ...]:
    out = []
    for p in patterns:
        if not isinstance(p, str) or not p.strip():
            raise InvalidArgument(f"{what} patterns must be non-empty strings, got {p!r}")
        out.append(p.strip())
    _spec(tuple(out))
    return tuple(out)
