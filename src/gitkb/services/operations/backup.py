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
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from gitkb.core.config import CONFIG_FILE
from gitkb.core.errors import Conflict, InvalidArgument, ValidationFailed
from gitkb.core.files import DIR_MODE
from gitkb.services.context import Context
from gitkb.services.derived import catchup
from gitkb.services.derived import identity as vector_identity
from gitkb.services.operations import verify
from gitkb.services.runtime import jobs
from gitkb.stores import backup_archive, git_bundle
from gitkb.stores.catalog import Catalog, open_catalog, table_rows
from gitkb.stores.catalog import backup as catalog_backup
from gitkb.stores.catalog import checkouts as checkout_rows
from gitkb.stores.catalog import vector_state as vs
from gitkb.stores.git_auth import check_url

CATALOG_MEMBER = "catalog/catalog.sqlite3"
SETTINGS_MEMBER = f"settings/{CONFIG_FILE}"
PROPOSAL_PREFIX = "refs/heads/gitkb/proposals/"
Progress = Any  # progress(done, total, stage)


def _version() -> str:
    try:
        return metadata.version("gitkb")
    except metadata.PackageNotFoundError:
        return "unknown"


def _staging(near: Path, prefix: str) -> Path:
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
    staged = _staging(archive.parent, f".{archive.name}.")
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
    staged = _staging(target.parent, f".{target.name}.restoring-")
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
