"""Backup and restore of a workspace: what is the truth goes in one archive, what is derived is
rebuilt.

In the archive (``gitkb.stores.backup_archive``): the catalog (indexes, documents, chunks, the
change log, jobs, sources, proposals, reviews, change requests, audit, webhook deliveries and
secrets, knowledge bases, bindings, sessions), ``gitkb.toml`` as it is (it holds references to
secrets -- ``token_env``, ``secrets_file`` -- and only the literal ``token = ...`` values an admin
wrote into it; the environment and secrets files stay out), and one git bundle per managed clone
(the tracked branch as fetched, the proposal branches with their staged commits). Not in it: the
keyword index and the vectors (derived: rebuilt), the clones' guard tokens and hooks (made anew),
logs, the writer lock.

``backup`` reads while a server writes: the catalog through SQLite's online backup API (one
snapshot), or on PostgreSQL as a ``table-rows`` export read in one REPEATABLE READ transaction
(``stores.catalog.table_rows``), then the clones. A proposal staged between the two is on its branch in the bundle but
not in the catalog copy: a commit nobody reviews, dropped by the next ``refresh_proposals``.

Restoring an archive: ``gitkb.services.operations.restore``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from gitkb.core.config import CONFIG_FILE
from gitkb.core.errors import Conflict, InvalidArgument
from gitkb.core.files import DIR_MODE
from gitkb.services.context import Context
from gitkb.stores import backup_archive, git_bundle
from gitkb.stores.catalog import Catalog, table_rows
from gitkb.stores.catalog import backup as catalog_backup

CATALOG_MEMBER = "catalog/catalog.sqlite3"
SETTINGS_MEMBER = f"settings/{CONFIG_FILE}"
PROPOSAL_PREFIX = "refs/heads/gitkb/proposals/"
Progress = Any  # progress(done, total, stage)


def _version() -> str:
    try:
        return metadata.version("gitkb")
    except metadata.PackageNotFoundError:
        return "unknown"


def staging(near: Path, prefix: str) -> Path:
    near.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=near))  # 0700


def backup(ctx: Context, path: str, progress: Progress | None = None) -> dict[str, Any]:
    """Write the archive at ``path``; what it holds and its sha256."""
    if not isinstance(path, str) or not path.strip():
        raise InvalidArgument("path must name the archive file to write")
    archive = Path(path).expanduser().absolute()
    if (held := backup_archive.taken(archive)) is not None:  # a symlink too: never written through
        raise Conflict(f"{held} exists; a backup never replaces a file", next_steps=["give a new file name"])
    home = ctx.settings.home
    staged = staging(archive.parent, f".{archive.name}.")
    try:
        catalog_entry, rows = _catalog(ctx, staged)
        tables = catalog_entry["tables"]
        settings_file = home / CONFIG_FILE
        if settings_file.is_file():
            (staged / "settings").mkdir(mode=DIR_MODE)
            shutil.copyfile(settings_file, staged / SETTINGS_MEMBER)
        clones = []
        for i, (source_id, name, url, branch) in enumerate(rows):
            if progress is not None:
                progress(i, len(rows), "clones")
            clones.append(_bundle(ctx, staged, source_id, name, url, branch))
        manifest: dict[str, Any] = {
            "format": backup_archive.FORMAT,
            "version": backup_archive.VERSION,
            "created_at": time.time(),
            "gitkb_version": _version(),
            "home": str(home),
            "catalog": catalog_entry,
            "settings": {"file": SETTINGS_MEMBER if settings_file.is_file() else None},
            "clones": clones,
            "not_copied": [
                "keyword index (rebuilt)",
                "vectors (reused or re-embedded)",
                "logs",
                "writer lock",
            ],
        }
        digest = backup_archive.write(archive, staged, manifest)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    warnings = [
        f"no managed clone to bundle for source {c['name']}: a restore clones it again from its remote, "
        "without the branches only the clone had"
        for c in clones
        if c["file"] is None
    ]
    return ({"Warnings": warnings} if warnings else {}) | {
        "path": str(archive),
        "sha256": digest,
        "checksum_file": str(backup_archive.checksum_path(archive)),
        "bytes": archive.stat().st_size,
        "tables": tables,
        "sources": [{k: c[k] for k in ("source_id", "name", "branch", "refs")} for c in clones],
        "proposal_branches": sorted(b for c in clones for b in c["proposal_branches"]),
        "settings": manifest["settings"]["file"] is not None,
        "Message": (
            f"wrote {archive} ({archive.stat().st_size} bytes, {sum(tables.values())} catalog rows in "
            f"{len(tables)} tables, {len(clones)} clone(s)); sha256 {digest}"
        ),
    }


def _catalog(ctx: Context, staged: Path) -> tuple[dict[str, Any], list[tuple[str, str, str, str]]]:
    """The catalog into the staged archive: SQLite's file through its online backup API, any other
    store (PostgreSQL) as a ``table-rows`` export read in one REPEATABLE READ snapshot; the
    manifest's entry and the sources whose clones to bundle."""
    if isinstance(ctx.catalog, Catalog):
        catalog_file = staged / CATALOG_MEMBER
        catalog_file.parent.mkdir(mode=DIR_MODE)
        catalog_backup.copy_online(ctx.catalog.path, catalog_file)
        entry = {
            "backend": "sqlite",
            "format": catalog_backup.SQLITE_FILE,
            "file": CATALOG_MEMBER,
            "migrations": catalog_backup.migrations_applied(catalog_file),
            "tables": catalog_backup.table_counts(catalog_file),
        }
        return entry, catalog_backup.sources(catalog_file)
    with ctx.catalog.read() as conn:  # one snapshot for every table
        exported = table_rows.export(conn, staged)
        rows = table_rows.sources(conn)
    backend = str(ctx.catalog.backend.get("engine", "postgresql"))
    return {
        "backend": backend,
        "format": catalog_backup.TABLE_ROWS,
        "dir": table_rows.TABLES_DIR,
        **exported,
    }, rows


def _bundle(ctx: Context, staged: Path, source_id: str, name: str, url: str, branch: str) -> dict[str, Any]:
    git_dir = ctx.settings.repos_path / source_id
    member = f"clones/{source_id}.bundle"
    refs: dict[str, str] = {}
    if git_dir.is_dir():
        (staged / "clones").mkdir(mode=DIR_MODE, exist_ok=True)
        refs = git_bundle.create(git_dir, staged / member)
    return {
        "source_id": source_id,
        "name": name,
        "url": url,
        "branch": branch,
        "file": member if refs else None,
        "refs": refs,
        "proposal_branches": sorted(
            r.removeprefix("refs/heads/") for r in refs if r.startswith(PROPOSAL_PREFIX)
        ),
    }


# -- restore -------------------------------------------------------------------------------
