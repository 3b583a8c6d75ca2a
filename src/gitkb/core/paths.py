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


# --------------------------------------------------------------------------- stored paths
#
# A stored path is the name a document is kept under in an index (ADD_TEXT's
# ``filepath``, RENAME_DOCUMENT's new name, every walked file, every git tree
# entry). The rules, shared by every interface:
#
# * a non-empty string of ``/``-separated segments, relative (no leading ``/``,
#   no drive letter);
# * no ``..`` segment and no ``.git`` segment (in any case or disguise);
# * no control characters (C0, DEL, C1), no line or paragraph separators, and
#   nothing that is not text (a name that was not valid UTF-8 on disk or in git
#   arrives as lone surrogates);
# * segments at most ``MAX_SEGMENT_BYTES`` bytes, the path at most
#   ``MAX_PATH_BYTES``.
#
# Callers' spellings that name the same path are tolerated: backslashes are
# read as ``/``, a leading ``./``, ``.`` segments, doubled and trailing ``/``.

_NAME_FORBIDDEN = frozenset({"Cc", "Cs", "Zl", "Zp"})


def name_problem(name: str) -> str | None:
    """Why the file or folder name ``name`` cannot be part of a stored path, or ``None``."""
    found = _name_problem(name)
    return None if found is None else found[0]


def unstorable_name(name: str) -> str | None:
    """Why a name found on disk or in a git tree cannot be stored or printed as is (bad
    characters only; ``.git`` and the like are left to the exclusion rules), or ``None``."""
    found = _name_problem(name)
    if found is None or found[1] not in ("not_utf8", "control_character", "backslash"):
        return None
    return found[0]


def _name_problem(name: str) -> tuple[str, str] | None:
    for ch in name:
        cat = unicodedata.category(ch)
        if cat == "Cs":
            return "the name is not valid UTF-8", "not_utf8"
        if cat in _NAME_FORBIDDEN:
            return f"the name holds the control character U+{ord(ch):04X}", "control_character"
    if "\\" in name:  # a POSIX name may hold one; a stored path reads it as a separator
        return "the name holds a backslash, which a stored path reads as a folder separator", "backslash"
    if name in ("", ".", ".."):
        return f"{name!r} is not a file name", "not_a_name"
    if _is_git_segment(name):
        return "names inside .git are not allowed", "git_dir"
    if len(name.encode("utf-8")) > MAX_SEGMENT_BYTES:
        return f"the name is longer than {MAX_SEGMENT_BYTES} bytes", "too_long"
    return None


def check_stored_path(path: object, *, field: str = "filepath") -> str:
    """The one stored path ``path`` names, or ``InvalidArgument`` (nothing is written)."""
    if not isinstance(path, str) or not path.strip():
        raise InvalidArgument(
            f"{field} must be a non-empty path such as 'docs/ops/rotate.md'", details={"reason": "empty"}
        )
    p = path.replace("\\", "/")
    if p.startswith("/") or _DRIVE.match(p):
        _refuse_stored(
            field,
            path,
            "absolute paths and drive letters are not allowed; give a path such as 'docs/ops/rotate.md'",
            "absolute",
        )
    parts = [seg for seg in p.split("/") if seg not in ("", ".")]
    if not parts:
        _refuse_stored(field, path, "the path names no file", "empty")
    for seg in parts:
        if seg == "..":
            _refuse_stored(field, path, "'..' segments are not allowed", "escape")
        found = _name_problem(seg)
        if found is not None:
            _refuse_stored(field, path, *found)
    result = "/".join(parts)
    if len(result.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        _refuse_stored(field, path, f"the path is longer than {MAX_PATH_BYTES} bytes", "too_long")
    return result


def _refuse_stored(field: str, raw: str, reason: str, code: str) -> None:
    shown = escape_name(raw)
    raise InvalidArgument(
        f"invalid {field} '{shown}': {reason}; nothing was written",
        details={"path": shown, "reason": code},
    )


_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _unsafe(ch: str) -> bool:
    return unicodedata.category(ch) in _NAME_FORBIDDEN or ch in _BIDI


def escape_name(name: str, *, keep: str = "") -> str:
    """``name`` with every character a terminal would act on spelled out.

    Bytes that were not UTF-8 (lone surrogates from ``surrogateescape``) become
    ``\\xNN``; control characters (C0, DEL, C1), line and paragraph separators
    and bidi overrides become ``\\xNN`` / ``\\uNNNN``. Characters in ``keep``
    (e.g. ``"\\n\\t"`` for a document's text) stay. Everything else, the
    backslash included, is kept, so ordinary names print unchanged.
    """
    if not any(_unsafe(ch) and ch not in keep for ch in name):
        return name
    out: list[str] = []
    for ch in name:
        o = ord(ch)
        if ch in keep or not _unsafe(ch):
            out.append(ch)
        elif 0xDC80 <= o <= 0xDCFF:  # an undecodable byte under surrogateescape
            out.append(f"\\x{o - 0xDC00:02x}")
        elif o < 0x100:
            out.append(f"\\x{o:02x}")
        else:
            out.append(f"\\u{o:04x}")
    return "".join(out)
