"""Restore of a workspace from an archive ``gitkb.services.operations.backup`` wrote.

``unpack`` lays an archive out as a new workspace directory (absent or empty; refused otherwise,
before anything is written), after checking it whole; a ``table-rows`` catalog goes into a new
SQLite file there, or into an empty PostgreSQL database when given its URL (loaded last, after the
clones are placed, so a refusal leaves nothing behind); ``rebuild`` then runs on the restored
workspace: the keyword index from the catalog's chunks, and every embedding index's vectors through
the usual catch-up (vectors still in the vector store -- a Chroma server's collection -- are kept
and reused, the rest embedded again), and says what still differs (``verify``'s check).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from gitkb.core.config import CONFIG_FILE
from gitkb.core.errors import Conflict, InvalidArgument, ValidationFailed
from gitkb.core.files import DIR_MODE
from gitkb.services.context import Context
from gitkb.services.derived import catchup
from gitkb.services.derived import identity as vector_identity
from gitkb.services.operations import verify
from gitkb.services.operations.backup import (
    CATALOG_MEMBER,
    PROPOSAL_PREFIX,
    SETTINGS_MEMBER,
    Progress,
    staging,
)
from gitkb.services.runtime import jobs
from gitkb.stores import backup_archive, git_bundle
from gitkb.stores.catalog import backup as catalog_backup
from gitkb.stores.catalog import checkouts as checkout_rows
from gitkb.stores.catalog import open_catalog, table_rows
from gitkb.stores.catalog import vector_state as vs
from gitkb.stores.git_auth import check_url


def check_target(directory: str) -> Path:
    """The restore target: absent, or an empty directory (``Conflict`` otherwise)."""
    if not isinstance(directory, str) or not directory.strip():
        raise InvalidArgument("directory must name the new workspace's directory")
    target = Path(directory).expanduser().absolute()
    if target.is_symlink():  # where it points is not what was named (and may change under us)
        raise Conflict(
            f"{target} is a symlink; restore writes a new workspace only into a real empty or absent "
            "directory; nothing was written",
            next_steps=[f"give the directory it points to: {os.path.realpath(target)}"],
        )
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise Conflict(
            f"{target} is not empty; restore writes a new workspace only into an empty or absent "
            "directory; nothing was written",
            next_steps=["give a new directory, or move the old workspace away first"],
        )
    return target


def unpack(
    archive: str, directory: str, checksum: str | None = None, catalog_url: str | None = None
) -> dict[str, Any]:
    """Check the archive and lay it out as a new workspace at ``directory``; what was restored.
    ``catalog_url`` (PostgreSQL): the catalog's rows go into that database (it must hold no gitkb
    rows; an archive at an older schema, or a SQLite file, is migrated forward first); else into a
    new SQLite catalog in ``directory``."""
    target = check_target(directory)
    if catalog_url is not None and (not isinstance(catalog_url, str) or not catalog_url.strip()):
        raise InvalidArgument("catalog_url must be a postgresql:// URL when given")
    source = Path(archive).expanduser().absolute()
    staged = staging(target.parent, f".{target.name}.restoring-")
    try:
        files = staged / "archive"
        manifest = backup_archive.read(source, files, checksum)
        _only_known_files(manifest)
        home = staged / "home"
        home.mkdir(mode=DIR_MODE)
        urls = _place_catalog(manifest, files, home, catalog_url)
        if (manifest.get("settings") or {}).get("file"):
            if not (files / SETTINGS_MEMBER).is_file():
                raise ValidationFailed(f"the archive's manifest names {SETTINGS_MEMBER} but does not hold it")
            os.replace(files / SETTINGS_MEMBER, home / CONFIG_FILE)
        clones = manifest.get("clones") or []
        _place_clones(clones, files, home, urls)
        if catalog_url is not None:  # last: once the rows are in, only moving files is left
            _import_rows(manifest["catalog"], files, catalog_url, home)
        if target.exists():  # empty, checked above (kept: it may be a mount point, or owned so)
            check_target(str(target))  # again, just before: nothing that came meanwhile is replaced
            for child in home.iterdir():
                os.replace(child, target / child.name)
        else:
            os.replace(home, target)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return {
        "directory": str(target),
        "archive": str(source),
        "sha256": backup_archive.sha256_of(source),
        "created_at": manifest.get("created_at"),
        "tables": manifest["catalog"].get("tables", {}),
        "sources": [{k: c.get(k) for k in ("source_id", "name", "branch", "refs")} for c in clones],
        "proposal_branches": sorted(  # from the refs checked against the bundles, not the manifest's list
            r.removeprefix("refs/heads/")
            for c in clones
            for r in (c.get("refs") if c.get("file") else None) or {}
            if r.startswith(PROPOSAL_PREFIX)
        ),
    }


def _only_known_files(manifest: dict[str, Any]) -> None:
    """The archive holds the catalog (the SQLite file, or a table-rows export's
    ``catalog/tables/<table>.jsonl``), gitkb.toml and clone bundles (``_place_clones`` checks
    which), nothing else: a ``-wal`` or ``-journal`` file beside the catalog would be read by SQLite
    while the catalog is checked (and left behind after), so the file checked would not be the file
    restored."""
    rows_dir = f"{table_rows.TABLES_DIR}/"
    unknown = sorted(
        name
        for name in manifest["files"]
        if name not in (CATALOG_MEMBER, SETTINGS_MEMBER)
        and not (name.startswith("clones/") and name.endswith(".bundle") and name.count("/") == 1)
        and not (name.startswith(rows_dir) and name.endswith(".jsonl") and name.count("/") == 2)
    )
    if unknown:
        raise ValidationFailed(
            f"the archive holds files a gitkb backup never has: {', '.join(unknown)[:300]}; nothing was restored"
        )


def _place_catalog(
    manifest: dict[str, Any], files: Path, home: Path, catalog_url: str | None
) -> dict[str, str]:
    """The catalog file into ``home`` (a SQLite archive, or a ``table-rows`` one restored into
    SQLite); the URL of each source id the restored catalog has."""
    cat = manifest.get("catalog") or {}
    if cat.get("format") == catalog_backup.TABLE_ROWS:
        if unknown := table_rows.unknown_migrations(list(cat.get("migrations") or [])):
            raise ValidationFailed(
                f"the archive's catalog was made by a newer gitkb (migrations {unknown}); upgrade gitkb to restore it"
            )
        urls = {sid: url for sid, _name, url, _branch in table_rows.archived_sources(files)}
        if catalog_url is None:
            path = home / "catalog.sqlite3"
            table_rows.create_sqlite(path, list(cat.get("migrations") or []))
            table_rows.load_sqlite(path, files, cat)
        return urls
    if cat.get("format") != catalog_backup.SQLITE_FILE:
        raise ValidationFailed(
            f"the archive's catalog is a {cat.get('format')!r} export ({cat.get('backend')}); "
            "this gitkb restores SQLite files and table-rows exports"
        )
    path = files / CATALOG_MEMBER
    catalog_backup.check_copy(path)
    if unknown := catalog_backup.unknown_migrations(path):
        raise ValidationFailed(
            f"the archive's catalog was made by a newer gitkb (migrations {unknown}); upgrade gitkb to restore it"
        )
    if foreign := catalog_backup.schema_differences(path):
        raise ValidationFailed(
            "the archive's catalog holds schema objects gitkb's migrations do not make (or alters "
            f"theirs): {'; '.join(foreign)[:600]}; nothing was restored"
        )
    if catalog_backup.table_counts(path) != cat.get("tables"):
        raise ValidationFailed("the archive's catalog does not hold the rows its manifest lists")
    urls = {sid: url for sid, _name, url, _branch in catalog_backup.sources(path)}
    if catalog_url is None:  # else _import_rows brings its rows forward into PostgreSQL
        os.replace(path, home / "catalog.sqlite3")
    return urls


def _import_rows(cat: dict[str, Any], files: Path, catalog_url: str, home: Path) -> None:
    """A ``table-rows`` export into the (empty) catalog at ``catalog_url``, in one transaction."""
    store = open_catalog(catalog_url, home / "catalog.sqlite3")
    try:
        applied = table_rows.migrations_applied(store.conn)
        archived = list(cat.get("migrations") or [])
        if not set(archived) <= set(applied):
            raise ValidationFailed(
                "the archive's catalog schema is not the target's (the archive: "
                f"{len(archived)} migrations, the target: {len(applied)}); restore it "
                "into SQLite (no catalog url) with this gitkb, or use the gitkb version that wrote it"
            )
        rows, entry = files, cat
        if cat.get("format") == catalog_backup.SQLITE_FILE or sorted(archived) != sorted(applied):
            rows = files / "forward"  # an older schema, or a SQLite file: migrated forward through SQLite
            entry = table_rows.forward_archive(cat, files, files / CATALOG_MEMBER, rows)
        with store.write() as w:
            table_rows.import_rows(w, rows, entry)
    finally:
        store.close()


def _place_clones(clones: list[dict[str, Any]], files: Path, home: Path, urls: dict[str, str]) -> None:
    """A clone per bundle, for the sources the restored catalog has (their ids and URLs are the
    catalog's, ``urls``: the manifest only says which file holds which refs)."""
    for url in urls.values():
        try:
            check_url(url)  # what `gitkb source add` refuses (ext::, a password in the URL)
        except InvalidArgument as exc:
            raise ValidationFailed(
                f"the archive's catalog holds a source URL gitkb refuses: {exc.message}"
            ) from None
    for c in clones:
        sid = c.get("source_id") if isinstance(c, dict) else None
        if not isinstance(sid, str) or sid not in urls or Path(sid).name != sid or sid.startswith("."):
            raise ValidationFailed(
                f"the archive's manifest lists a clone of no source in its catalog: {c!r:.200}"
            )
        if not c.get("file"):
            continue  # the source had no clone at backup time: gitkb clones it again when it needs it
        if c["file"] != f"clones/{c['source_id']}.bundle" or not isinstance(c.get("refs"), dict):
            raise ValidationFailed(f"the archive's manifest entry for {c['source_id']} is malformed")
        repos = home / "repos"
        repos.mkdir(mode=DIR_MODE, exist_ok=True)
        git_bundle.clone_from(
            files / c["file"], repos / c["source_id"], url=urls[c["source_id"]], refs=c["refs"]
        )


def rebuild(
    ctx: Context, progress: Progress | None = None, *, new_workspace_id: bool = False
) -> dict[str, Any]:
    """On a workspace just restored: rebuild the keyword index, bring every embedding index's
    vectors back (kept when the vector store still has them, embedded otherwise). The restored
    workspace keeps the original's workspace id (its collections) unless ``new_workspace_id``: then it
    gets one of its own and every vector is embedded into its own collections."""
    if new_workspace_id:
        vector_identity.give_new_workspace_id(ctx)
    if progress is not None:
        progress(0, 1, "keywords")
    with ctx.write_lock:
        chunks = catchup.rebuild_keywords(ctx)
    if progress is not None:
        progress(1, 1, "keywords")
    out: dict[str, Any] = {"keyword_chunks": chunks}
    binds = vs.bindings(ctx.catalog.conn)
    if binds:
        with ctx.catalog.write() as w:
            for index_id in sorted(binds):
                vs.log_reembed(w, index_id)  # the catch-up keeps what the store has, embeds the rest
        built = jobs.run_inline(
            ctx,
            "build_embeddings",
            {},
            progress=(lambda d, t, *_: progress(d, t, "vectors")) if progress else None,
        )
        out["embeddings"] = {
            k: built.get(k) for k in ("chunks_embedded", "chunks_reused", "chunks_had_vector", "vectors")
        }
    out["differences"] = [d.as_dict() for d in verify.check(ctx)]
    if rows := checkout_rows.all_paths(ctx.catalog.conn):
        out["Warnings"] = [
            f"{len(rows)} checkout(s) came back with the catalog and are refreshed by this workspace on "
            f"their node when a source syncs: {', '.join(f'{n}:{p}' for n, p in rows[:5])}"
            + (" ..." if len(rows) > 5 else "")
            + "; while the original workspace also runs on that host, both refresh them: run one of the two"
        ]
    return out
