"""The backup archive: one gzip'd tar file, ``manifest.json`` first, then the files it lists.

    manifest.json                 format, version, what the archive holds, sha256 and size per file
    catalog/catalog.sqlite3       the catalog (SQLite online backup); or, from a backend without a
    catalog/tables/<table>.jsonl  database file (PostgreSQL), one JSON-lines file per table
    settings/gitkb.toml           the workspace's gitkb.toml, when it has one
    clones/<source id>.bundle     each managed clone's refs (tracked branch, proposal branches)

The archive is written 0600 to a new temporary name and linked into place, so a half-written
archive never carries the final name, and neither it nor its ``.sha256`` replaces or writes through
anything (a symlink planted at either name is refused); ``<archive>.sha256`` next to it holds the
archive's sha256 in ``sha256sum`` format. Reading checks every file against the manifest while extracting (and the
archive's own sha256 when one is given or the ``.sha256`` file is there), so a damaged archive is
refused before anything of it is used.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
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


def taken(archive: Path) -> Path | None:
    """The first of ``archive`` and its ``.sha256`` file that something already holds (a file, a
    directory, a symlink even dangling), or None: a backup writes neither through nor over one."""
    for p in (archive, checksum_path(archive)):
        if os.path.lexists(p):
            return p
    return None


def _conflict(path: Path) -> Conflict:
    return Conflict(
        f"{path} exists; a backup never replaces a file (nor writes through a symlink)",
        next_steps=["give a new file name, e.g. one with the date in it"],
    )


def write(archive: Path, staged: Path, manifest: dict[str, Any]) -> str:
    """Write the files under ``staged`` (every one named in ``manifest["files"]``, which this fills
    with their sha256 and size) to ``archive``; returns the archive's sha256.

    The ``.sha256`` name is taken first (``O_EXCL``: never through a symlink), the archive is
    written to a new temporary name (``mkstemp``) and hard-linked to its final name, which fails
    when anything took that name meanwhile: nothing is ever replaced or written through a link."""
    if (held := taken(archive)) is not None:
        raise _conflict(held)
    names = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file())
    manifest["files"] = {
        n: {"sha256": sha256_of(staged / n), "bytes": (staged / n).stat().st_size} for n in names
    }
    body = json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8")
    side = checksum_path(archive)
    try:
        sfd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    except FileExistsError:
        raise _conflict(side) from None
    fd, tmp_name = tempfile.mkstemp(prefix=f".{archive.name}.", suffix=".partial", dir=archive.parent)
    tmp = Path(tmp_name)  # 0600, O_EXCL: it holds webhook secrets
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
        _place(tmp, archive)
        digest = sha256_of(archive)
        with os.fdopen(sfd, "w", encoding="utf-8") as f:
            sfd = -1
            f.write(f"{digest}  {archive.name}\n")
    except BaseException:
        if sfd >= 0:
            os.close(sfd)
        side.unlink(missing_ok=True)
        raise
    finally:
        tmp.unlink(missing_ok=True)
    return digest


def _place(tmp: Path, archive: Path) -> None:
    """``tmp`` at ``archive``, never replacing anything there: a hard link (EEXIST when the name is
    held); where the filesystem has none, the name is reserved ``O_EXCL`` first, then replaced."""
    try:
        os.link(tmp, archive)
        return
    except FileExistsError:
        raise _conflict(archive) from None
    except OSError:  # no hard links here (some network and FUSE filesystems)
        pass
    try:
        os.close(os.open(archive, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE))
    except FileExistsError:
        raise _conflict(archive) from None
    os.replace(tmp, archive)


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


MANIFEST_MAX = 16 << 20  # bytes: a manifest lists a few files per source, never this much
FILES_MAX = 100_000  # files in one archive (the catalog, gitkb.toml, a bundle per source)
HEADER_ROOM = 64 << 10  # what a member's tar headers (pax, long names) and read-ahead may take


class _Overrun(OSError):
    """The archive's tar stream holds more than its manifest declares (a decompression bomb)."""


class _Bounded:
    """The decompressed tar stream, readable only as far as ``allow`` has allowed: a member's
    headers get ``HEADER_ROOM``, its data the size the manifest declares, nothing more is read."""

    def __init__(self, raw: Any) -> None:
        self.raw, self.left = raw, 0

    def allow(self, n: int) -> None:
        """Allow ``n`` more bytes; what an earlier allowance left unread carries over up to
        ``HEADER_ROOM`` only, so slack never adds up across members."""
        self.left = min(self.left, HEADER_ROOM) + n

    def read(self, n: int = -1) -> bytes:
        if self.left <= 0:
            raise _Overrun("it holds more than its manifest declares")
        block: bytes = self.raw.read(self.left if n < 0 else min(n, self.left))
        self.left -= len(block)
        return block


def read(archive: Path, into: Path, checksum: str | None = None) -> dict[str, Any]:
    """Check ``archive`` and extract its files under ``into`` (an empty directory); returns the
    manifest. ``ValidationFailed`` when the sha256, the manifest or any file does not hold.

    What it reads is bounded by what the manifest declares: a regular file per listed name of
    exactly its declared size (no links, devices, sparse members), the declared total within the
    free space, and the tar stream itself read no further than that (``_Bounded``)."""
    if not archive.is_file():
        raise NotFound(f"no backup archive at {archive}")
    want = expected_checksum(archive, checksum)
    if want is not None and sha256_of(archive) != want:
        raise _damaged(archive, f"its sha256 is not {want}")
    try:
        with gzip.open(archive, "rb") as raw:
            stream = _Bounded(raw)
            stream.allow(HEADER_ROOM)
            with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
                first = tar.next()
                if first is None or first.name != MANIFEST or not _plain(first):
                    raise _damaged(archive, f"it does not start with {MANIFEST}")
                if first.size > MANIFEST_MAX:
                    raise _damaged(archive, f"its {MANIFEST} is {first.size} bytes")
                stream.allow(first.size)
                manifest = _manifest(archive, tar.extractfile(first))
                files: Mapping[str, Any] = manifest["files"]
                _fits(archive, files, into)
                seen: set[str] = set()
                while True:
                    stream.allow(HEADER_ROOM)
                    if (member := tar.next()) is None:
                        break
                    spec = files.get(member.name)
                    if spec is None or not _plain(member) or member.name in seen:
                        raise _damaged(archive, f"unexpected member {member.name!r}")
                    if member.size != spec["bytes"]:
                        raise _damaged(archive, f"{member.name} is not the size its manifest declares")
                    stream.allow(member.size)
                    _extract(archive, tar, member, into / member.name, spec)
                    seen.add(member.name)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
        raise _damaged(archive, f"{type(exc).__name__}: {exc}") from None
    if missing := sorted(set(files) - seen):
        raise _damaged(archive, f"the files {missing} the manifest lists are missing")
    return manifest


def _plain(member: tarfile.TarInfo) -> bool:
    """A regular file's member: not a link, a device, a directory, nor a sparse or contiguous file."""
    return member.type in (tarfile.REGTYPE, tarfile.AREGTYPE)


def _fits(archive: Path, files: Mapping[str, Any], into: Path) -> None:
    total = sum(int(spec["bytes"]) for spec in files.values())
    near = into if into.exists() else into.parent
    free = shutil.disk_usage(near).free
    if total > free:
        raise _damaged(archive, f"its manifest declares {total} bytes, more than the {free} free at {near}")


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
    files = manifest.get("files")
    if not isinstance(files, dict) or not files or len(files) > FILES_MAX:
        raise _damaged(archive, f"{MANIFEST} lists no files")
    for name, spec in files.items():
        if not (
            isinstance(spec, dict)
            and isinstance(spec.get("sha256"), str)
            and type(spec.get("bytes")) is int
            and spec["bytes"] >= 0
        ):
            raise _damaged(archive, f"{MANIFEST}'s entry for {name!r:.100} is malformed")
    for key, kind in (("catalog", dict), ("settings", dict), ("clones", list)):
        if key in manifest and not isinstance(manifest[key], kind):
            raise _damaged(archive, f"{MANIFEST}'s {key} is not a {kind.__name__}")
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
