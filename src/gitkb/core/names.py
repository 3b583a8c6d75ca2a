"""Validation of user-supplied names and stored document paths (pure)."""

from __future__ import annotations

import re

from gitkb.core.errors import InvalidArgument
from gitkb.core.paths import escape_name, name_problem

INDEX_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def validate_index_name(name: object, *, field: str = "index_name") -> str:
    if not isinstance(name, str) or not name:
        raise InvalidArgument(
            f"{field} is required: a name like 'runbooks' ([A-Za-z0-9][A-Za-z0-9_.-]{{0,127}})"
        )
    if not INDEX_NAME_RE.fullmatch(name):
        raise InvalidArgument(
            f"invalid {field} {name!r}: use 1-128 characters, letters, digits, '_', '.', '-', "
            "starting with a letter or digit"
        )
    return name


def normalize_stored_path(path: object, *, field: str = "filepath") -> str:
    """A stored document path as callers may spell it: leading/trailing '/' and './' tolerated."""
    if not isinstance(path, str) or not path.strip():
        raise InvalidArgument(f"{field} must be a non-empty path such as 'docs/ops/rotate.md'")
    p = path.strip().replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    p = p.strip("/")
    p = re.sub(r"/{2,}", "/", p)
    if not p:
        raise InvalidArgument(f"{field} must name a document, got {path!r}")
    return p


def validate_new_filename(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument("new_filename must be a non-empty file name such as 'rotate-keys.md'")
    n = name.strip()
    if "/" in n or "\\" in n or n in (".", ".."):
        raise InvalidArgument(
            f"new_filename {escape_name(name)!r} must be a file name without folders; RENAME_DOCUMENT keeps the folder"
        )
    problem = name_problem(n)
    if problem is not None:
        raise InvalidArgument(
            f"invalid new_filename '{escape_name(name)}': {problem}; nothing was renamed",
            details={"path": escape_name(name)},
        )
    return n
