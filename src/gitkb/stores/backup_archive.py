"""The backup archive: one gzip'd tar file, ``manifest.json`` first, then the files it lists.

    manifest.json                 format, version, what the archive holds, sha256 and size per file
    catalog/catalog.sqlite3       the catalog (SQLite online backup); or, from a backend without a
    catalog/tables/<table>.jsonl  database file (PostgreSQL), one JSON-lines file per table
    settings/gitkb.toml           the workspace's gitkb.toml, when it has one
    clones/<source id>.bundle     each managed clone's refs (tracked branch, proposal branches)

The archive is written 0600 to a temporary name and renamed into place, so a half-written archive
never carries the final name; ``<archive>.sha256`` next to it holds the archive's sha256 in
``sha256sum`` format. Reading checks every file against the manifest while extracting (and the
archive's own sha256 when one is given or the ``.sha256`` file is there), so a damaged archive is
refused before anything of it is used.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitkb.core.errors import Conflict, InvalidArgument, NotFound, ValidationFailed
from gitkb.core.files import FILE_MODE

FORMAT = "gitkb-backup"
VERSION = 1
MANIFEST = "manifest.json"
CHUNK = 1 << 20


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def checksum_path(archive: Path) -> Path:
    return archive.with_name(archive.name + ".sha256")


def write(archive: Path, staged: Path, manifest: dict[str, Any]) -> str:
    """Write the files under ``staged`` (every one named in ``manifest["files"]``, which this fills
    with their sha256 and size) to ``archive``; returns the archive's sha256."""
    if archive.exists():
        raise Conflict(
            f"{archive} exists; a backup never replaces a file",
            next_steps=["give a new file name, e.g. one with the date in it"],
        )
    names = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file())
    manifest["files"] = {
        n: {"sha256": sha256_of(staged / n), "bytes": (staged / n).stat().st_size} for n in names
    }
    body = json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8")
    tmp = archive.with_name(f".{archive.name}.partial")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)  # it holds webhook secrets
    try:
        with os.fdopen(fd, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz") as tar:
                info = tarfile.TarInfo(MANIFEST)
                info.size, info.mode = len(body), FILE_MODE
                tar.addfile(info, io.BytesIO(body))
                for n in names:
                    tar.add(staged / n, arcname=n, recursive=False)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, archive)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    digest = sha256_of(archive)
    side = checksum_path(archive)
    sfd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(sfd, "w", encoding="utf-8") as f:
        f.write(f"{digest}  {archive.name}\n")
    return digest


def _damaged(archive: Path, why: str) -> ValidationFailed:
    return ValidationFailed(
        f"the archive {archive} is damaged or not a gitkb backup ({why}); nothing was restored",
        next_steps=["restore from another copy of the backup, or take a new one with `gitkb backup FILE`"],
    )


def expected_checksum(archive: Path, given: str | None) -> str | None:
    """The sha256 the archive must have: the one given, else the ``.sha256`` file's, else None."""
    if given:
        if len(given.strip()) != 64 or any(c not in "0123456789abcdef" for c in given.strip().lower()):
            raise InvalidArgument(f"a sha256 is 64 hex digits, got {given!r}")
        return given.strip().lower()
    side = checksum_path(archive)
    if side.is_file():
        words = side.read_text("utf-8", errors="replace").split()
        return words[0].lower() if words else None
    return None


def read(archive: Path, into: Path, checksum: str | None = None) -> dict[str, Any]:
    """Check ``archive`` and extract its files under ``into`` (an empty directory); returns the
    manifest. ``ValidationFailed`` when the sha256, the manifest or any file does not hold."""
    if not archive.is_file():
        raise NotFound(f"no backup archive at {archive}")
    want = expected_checksum(archive, checksum)
    if want is not None and sha256_of(archive) != want:
        raise _damaged(archive, f"its sha256 is not {want}")
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST or not first.isfile():
                raise _damaged(archive, f"it does not start with {MANIFEST}")
            manifest = _manifest(archive, tar.extractfile(first))
            files: Mapping[str, Any] = manifest["files"]
            seen: set[str] = set()
            while (member := tar.next()) is not None:
                if member.name not in files or not member.isfile() or member.name in seen:
                    raise _damaged(archive, f"unexpected member {member.name!r}")
                _extract(archive, tar, member, into / member.name, files[member.name])
                seen.add(member.name)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
        raise _damaged(archive, f"{type(exc).__name__}: {exc}") from None
    if missing := sorted(set(files) - seen):
        raise _damaged(archive, f"the files {missing} the manifest lists are missing")
    return manifest


def _manifest(archive: Path, f: Any) -> dict[str, Any]:
    try:
        manifest = json.loads(f.read().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise _damaged(archive, f"{MANIFEST} is not JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _damaged(archive, f"{MANIFEST} is not a {FORMAT} manifest")
    if manifest.get("version") != VERSION:
        raise ValidationFailed(
            f"the archive {archive} is a backup of format version {manifest.get('version')}; "
            f"this gitkb reads version {VERSION}"
        )
    if not isinstance(manifest.get("files"), dict):
        raise _damaged(archive, f"{MANIFEST} lists no files")
    return manifest


def _extract(archive: Path, tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, want: Any) -> None:
    parts = Path(member.name).parts
    if Path(member.name).is_absolute() or ".." in parts:
        raise _damaged(archive, f"unsafe member name {member.name!r}")
    src = tar.extractfile(member)
    if src is None:
        raise _damaged(archive, f"{member.name} cannot be read")
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    h, size = hashlib.sha256(), 0
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "wb") as out:
        while block := src.read(CHUNK):
            h.update(block)
            size += len(block)
            out.write(block)
    if not isinstance(want, dict) or h.hexdigest() != want.get("sha256") or size != want.get("bytes"):
        raise _damaged(archive, f"{member.name} does not match its sha256 in the manifest")
