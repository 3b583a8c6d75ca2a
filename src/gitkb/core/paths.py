"""Path rules for proposals: which repository paths an agent may edit.

Pure and I/O-free. :func:`normalize_proposal_path` turns what an agent typed
into the one repository-relative path it names, or refuses it with
``InvalidArgument`` and a reason:

* the path is relative to the source's ``documents_root``; a path that
  already starts with the documents root (exactly, case included) is
  accepted too;
* backslashes are read as ``/`` and then checked like the rest;
* refused: absolute paths, drive letters and any ``:``; NUL, control and
  invisible format characters; empty segments (``a//b``, trailing ``/``);
  segments ending in a dot or a space (Windows aliases); ``.git`` segments in
  any case or disguise (``.GIT``, ``.git.``, ``git~1``); ``..`` that climbs
  out of the documents root (``..`` inside it is resolved); a prefix that
  equals the documents root only when case is ignored (``DOCS/../..``);
  percent-encoded or Unicode-compatibility forms of separators, dots,
  colons or control characters (``..%2f``, ``%2e%2e/``, ``%252e``, fullwidth
  ``．．／``) -- the path is kept literally, but one that would change shape
  when decoded is refused;
* the file must sit in a first-level folder of the documents root or deeper
  (``docs/edw/guide.md`` yes, ``docs/guide.md`` and ``README.md`` no), with a
  supported extension (case-insensitive). The two sidecars ``kb-manifest.json``
  and ``gitkb.yml`` directly at the documents root are the exception.

Symlinks cannot be judged from a string; the repository store refuses paths
that go through a symlink entry of the tree (``ManagedRepo.is_symlink_path``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from urllib.parse import unquote

from gitkb.core.errors import InvalidArgument

DEFAULT_ALLOWED_EXTS: tuple[str, ...] = (".md", ".yml", ".yaml", ".json", ".txt", ".csv")
SIDECAR_NAMES: tuple[str, ...] = ("kb-manifest.json", "gitkb.yml")
MAX_SEGMENT_BYTES = 255
MAX_PATH_BYTES = 4096

_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})
_DRIVE = re.compile(r"^[A-Za-z]:")
_GIT_ALIASES = frozenset({".git", "git~1"})


def normalize_proposal_path(
    relative_path: str,
    *,
    documents_root: str,
    allowed_exts: Iterable[str] = DEFAULT_ALLOWED_EXTS,
) -> str:
    """Return ``<documents_root>/<folder>/.../<file>`` or raise ``InvalidArgument``."""
    root_parts = documents_root_parts(documents_root)
    if not isinstance(relative_path, str):
        _refuse(relative_path, "the path must be a string", "type")
    raw = relative_path
    if not raw or not raw.strip():
        _refuse(raw, "the path is empty", "empty")
    _check_characters(raw)
    _check_decoded_forms(raw)

    path = raw.replace("\\", "/")
    if path.startswith("/"):
        _refuse(raw, "absolute paths are not allowed; give a path relative to the documents root", "absolute")
    if _DRIVE.match(path) or ":" in path:
        _refuse(raw, "drive letters and ':' are not allowed in paths", "drive")
    parts = path.split("/")
    for seg in parts:
        _check_segment(raw, seg)
    parts = [seg for seg in parts if seg != "."]

    n = len(root_parts)
    if n and parts[:n] == root_parts:
        rel = parts[n:]
    elif n and [p.casefold() for p in parts[:n]] == [r.casefold() for r in root_parts]:
        _refuse(
            raw,
            f"the path starts with {'/'.join(parts[:n])!r}, which differs from the documents root "
            f"{'/'.join(root_parts)!r} only in case; spell the root exactly or leave it out",
            "case",
        )
    else:
        rel = parts

    stack: list[str] = []
    for seg in rel:
        if seg == "..":
            if not stack:
                _refuse(raw, "the path climbs out of the documents root with '..'", "escape")
            stack.pop()
        else:
            stack.append(seg)
    root = "/".join(root_parts)
    shown_root = root or "the repository root"
    if not stack:
        _refuse(raw, "the path names the documents root itself, not a file", "not_a_file")
    if len(stack) == 1:
        if stack[0] in SIDECAR_NAMES:
            return "/".join([*root_parts, stack[0]])
        _refuse(
            raw,
            f"files directly under {shown_root} cannot be proposed; put the file in a first-level "
            f"folder ({root + '/' if root else ''}<folder>/{stack[0]}); only the sidecars "
            f"{', '.join(SIDECAR_NAMES)} may sit at the documents root",
            "not_in_folder",
        )
    exts = tuple(e.lower() for e in allowed_exts)
    name = stack[-1]
    dot = name.rfind(".")
    ext = name[dot:].lower() if dot > 0 else ""
    if ext not in exts:
        _refuse(
            raw,
            f"unsupported file type {ext or '(no extension)'!r}; allowed: {', '.join(exts)}",
            "extension",
        )
    result = "/".join([*root_parts, *stack])
    if len(result.encode("utf-8")) > MAX_PATH_BYTES:
        _refuse(raw, f"the path is longer than {MAX_PATH_BYTES} bytes", "too_long")
    return result


def documents_root_parts(documents_root: str) -> list[str]:
    """Split and check a source's documents root (``""`` or ``"."`` = the repository root)."""
    root = (documents_root or "").replace("\\", "/").strip("/")
    if root in ("", "."):
        return []
    parts = [p for p in root.split("/") if p != "."]
    for seg in parts:
        bad = (
            seg in ("", "..")
            or ":" in seg
            or _is_git_segment(seg)
            or any(unicodedata.category(ch) in _FORBIDDEN_CATEGORIES for ch in seg)
        )
        if bad:
            raise InvalidArgument(
                f"invalid documents_root {documents_root!r}",
                details={"reason": "documents_root"},
            )
    return parts


def _refuse(raw: object, reason: str, code: str) -> None:
    raise InvalidArgument(
        f"invalid path {raw!r}: {reason}",
        details={"path": str(raw), "reason": code},
    )


def _check_characters(raw: str) -> None:
    for ch in raw:
        if ch == "\x00" or unicodedata.category(ch) in _FORBIDDEN_CATEGORIES:
            _refuse(raw, f"control or invisible character U+{ord(ch):04X} in path", "control_character")


def _check_segment(raw: str, seg: str) -> None:
    if seg == "":
        _refuse(raw, "empty path segment (a doubled, leading or trailing '/')", "empty_segment")
    if seg in (".", ".."):
        return
    if _is_git_segment(seg):
        _refuse(raw, "paths into .git are not allowed", "git_dir")
    if seg[-1] in ". " or seg[0] == " ":
        _refuse(raw, f"path segment {seg!r} starts with a space or ends with a dot or space", "segment_edge")
    if len(seg.encode("utf-8")) > MAX_SEGMENT_BYTES:
        _refuse(raw, f"a path segment is longer than {MAX_SEGMENT_BYTES} bytes", "too_long")


def _is_git_segment(seg: str) -> bool:
    return seg.casefold().rstrip(". ") in _GIT_ALIASES


def _fully_unquoted(s: str) -> str:
    for _ in range(10):
        decoded = unquote(s)
        if decoded == s:
            return s
        s = decoded
    return s


def _shape(s: str) -> tuple[object, ...]:
    """What matters for traversal: separators, special segments, colons, controls."""
    segs = s.replace("\\", "/").split("/")
    special = tuple((i, seg) for i, seg in enumerate(segs) if seg in ("", ".", "..") or _is_git_segment(seg))
    controls = any(ch == "\x00" or unicodedata.category(ch) in _FORBIDDEN_CATEGORIES for ch in s)
    return (len(segs), special, s.count(":"), controls)


def _check_decoded_forms(raw: str) -> None:
    shape = _shape(raw)
    decoded = _fully_unquoted(raw)
    smuggled = any(decoded.count(ch) > raw.count(ch) for ch in "./\\:")
    if smuggled or _shape(decoded) != shape:
        _refuse(
            raw, "percent-encoded separators, dots, colons or control characters are not allowed", "encoded"
        )
    for form in ("NFKC", "NFKD"):
        for s in (raw, decoded):
            if _shape(unicodedata.normalize(form, s)) != shape:
                _refuse(
                    raw,
                    "Unicode look-alikes of separators, dots or colons are not allowed",
                    "unicode_lookalike",
                )
