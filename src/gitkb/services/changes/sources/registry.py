"""Register, list, resolve and remove git sources; open their managed clones and forges.

A source's clone is a bare repository at ``<home>/repos/<source id>``, owned
by gitkb (see :mod:`gitkb.stores.repos` for the guard hooks). What the source
row stores about credentials is the *name* of an admin-configured credential
(``[[credentials]]`` of gitkb.toml, bound to hosts; see
:mod:`gitkb.services.changes.sources.credentials`), never a value nor a caller-chosen
environment variable or file; values are loaded when the network is used and
redacted from every message.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gitkb.core.errors import Conflict, InvalidArgument, NotFound, ValidationFailed
from gitkb.core.files import private_dirs
from gitkb.core.hosts import url_authority
from gitkb.core.names import validate_index_name
from gitkb.core.paging import page_of, paged
from gitkb.core.paths import documents_root_parts
from gitkb.forges import Forge, ForgeConfig, create_forge
from gitkb.services.changes import audit
from gitkb.services.changes.sources import credentials as creds_
from gitkb.services.changes.sources.branches import follow_branch
from gitkb.services.changes.sources.forge_meter import metered
from gitkb.services.changes.sources.selection import check_globs, effective_config
from gitkb.services.changes.sources.sidecars import SCHEMA_FILES, Sidecars, read_sidecars
from gitkb.services.context import Context
from gitkb.services.derived.catchup import catch_up_keywords
from gitkb.services.indexing.indexes import create_index
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.git_auth import GitCredentials, check_url, redact_url
from gitkb.stores.repos import ManagedRepo

FORGE_KINDS = ("local", "github", "gitlab")
FORGE_KEYS = ("kind", "repo", "api_url", "credential", "installation_id")


def resolve_source(ctx: Context, source_id_or_index: Any) -> SourceRow:
    """A source by name or id, or the one source feeding the named index."""
    if not isinstance(source_id_or_index, str) or not source_id_or_index.strip():
        raise InvalidArgument("a source name (or the name of an index fed by one) is required")
    key = source_id_or_index.strip()
    conn = ctx.catalog.conn
    row = source_rows.get_by_name(conn, key) or source_rows.get_by_id(conn, key)
    if row is not None:
        return row
    idx = index_rows.get_by_name(conn, key)
    if idx is not None:
        fed = source_rows.sources_for_index(conn, idx.id)
        if len(fed) == 1:
            return fed[0]
        if len(fed) > 1:
            raise InvalidArgument(
                f"index {key!r} is fed by several sources: {', '.join(s.name for s in fed)}; name one",
                details={"candidates": [s.name for s in fed]},
            )
    known = [s.name for s in source_rows.list_all(conn)]
    raise NotFound(
        f"no source {key!r} ({'known sources: ' + ', '.join(known) if known else 'no source is registered'})",
        next_steps=["register one with `gitkb source add NAME URL`", "list them with `gitkb source list`"],
    )


def repo_path(ctx: Context, row: SourceRow) -> Any:
    return ctx.settings.repos_path / row.id


def credentials_for(ctx: Context, source: Mapping[str, Any], url: str) -> GitCredentials | None:
    """The git credentials of a source (its ``credential``, checked against ``url``'s host)."""
    return creds_.git_credentials(ctx.settings, source, url)


def open_repo(ctx: Context, row: SourceRow) -> ManagedRepo:
    """The source's managed clone (cloned again if it went missing), its proposal branch rebuilt from
    the catalog when the clone lacks it (``branches.ensure_branch``)."""
    path = repo_path(ctx, row)
    creds = credentials_for(ctx, row.settings, row.url)
    if not path.exists():
        repo = ManagedRepo.clone(row.url, path, branch=row.branch, credentials=creds)
    else:
        repo = ManagedRepo.open(path, credentials=creds)
    follow_branch(ctx, row, repo, proposal_branch(row))
    return repo


def read_source_sidecars(repo: ManagedRepo, commit: str, documents_root: str) -> Sidecars:
    """Validated sidecars at ``commit`` (``ValidationFailed`` names the file)."""
    root = documents_root.strip("/")
    found: dict[str, bytes | None] = {}
    for name in SCHEMA_FILES:
        path = f"{root}/{name}" if root else name
        try:
            found[name] = repo.read_blob(commit, path)
        except NotFound:
            found[name] = None
    return read_sidecars(found, root)


def require_fed(row: SourceRow, repo: ManagedRepo, base: str, *paths: str) -> None:
    """Each path is a file the source feeds its indexes (its selection at the synced commit: include,
    exclude, sidecars; and at ``base`` too when it is another commit: a fetched head's exclude, not
    synced yet, already holds), or a sidecar at its documents root (the only ones read as configuration): a
    proposal reads and writes no other file of the repository (another source's, an excluded one, a
    file named like a sidecar in a folder the source does not feed), whose text no index of this
    source holds."""
    ats = [row.synced_commit or base] + ([base] if row.synced_commit and base != row.synced_commit else [])
    for at in ats:  # the synced selection and, when newer, the one at base (an exclude not synced yet)
        _require_selected(row, repo, at, paths)


def _require_selected(row: SourceRow, repo: ManagedRepo, at: str, paths: tuple[str, ...]) -> None:
    try:
        sidecars = read_source_sidecars(repo, at, row.documents_root)
    except ValidationFailed as exc:  # a sidecar that does not validate there selects nothing
        raise InvalidArgument(
            f"source {row.name!r} cannot tell which files it feeds at {at[:12]}: {exc.message}; nothing was"
            " staged",
            details={"paths": list(paths)},
        ) from None
    cfg = effective_config(row.settings, row.documents_root, sidecars)
    for path in paths:
        rel = cfg.relative(path)
        if rel and (rel in SCHEMA_FILES or cfg.selects(path)):
            continue
        raise InvalidArgument(
            f"{path!r} is not a file source {row.name!r} feeds its indexes (its include, exclude and"
            " sidecars decide); nothing was staged",
            details={"path": path},
        )


def forge_for(ctx: Context, row: SourceRow) -> Forge:
    cfg = dict(row.settings.get("forge") or {"kind": "local"})
    kind = cfg.get("kind") or "local"
    if kind == "local":
        local = create_forge(ForgeConfig(kind="local", repo=row.url, options={"catalog": ctx.catalog}))
        return metered(local, "local", ctx.meters)
    cred = creds_.forge_credential(ctx.settings, row.settings)
    token, app_key, app_id = creds_.forge_secret(cred, kind)
    forge = create_forge(
        ForgeConfig(
            kind=kind,
            repo=str(cfg.get("repo") or ""),
            api_url=cfg.get("api_url"),
            token=token,
            app_id=app_id,
            app_private_key=app_key,
            installation_id=cfg.get("installation_id"),
        )
    )
    return metered(forge, str(kind), ctx.meters)


def _clean_refs(given: Mapping[str, Any] | None, allowed: Sequence[str], what: str) -> dict[str, Any]:
    out = {k: v for k, v in dict(given or {}).items() if v not in (None, "")}
    bad = sorted(set(out) - set(allowed))
    if bad:
        raise InvalidArgument(f"unknown {what} setting(s) {', '.join(bad)}; allowed: {', '.join(allowed)}")
    return out


def add_source(
    ctx: Context,
    name: Any,
    url: Any,
    *,
    branch: str = "main",
    documents_root: str = "docs",
    index: Any = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    forge: Mapping[str, Any] | None = None,
    auth: Mapping[str, Any] | None = None,
    credential: str | None = None,
    actor: str = "operator",
) -> dict[str, Any]:
    name = validate_index_name(name, field="source name")
    if not isinstance(url, str):
        raise InvalidArgument("url must be a string: a local path, file://, git://, https:// or ssh URL")
    check_url(url)
    flags, names = _source_settings(
        ctx,
        documents_root=documents_root,
        auth=auth,
        forge=forge,
        index=index,
        include=include,
        exclude=exclude,
        credential=credential,
    )
    git_creds = credentials_for(ctx, flags, url)  # refuses a credential the URL's host is not bound to
    if flags.get("forge", {}).get("kind", "local") != "local":
        creds_.forge_credential(ctx.settings, flags)  # and one the forge API's host is not bound to
    conn = ctx.catalog.conn
    if source_rows.get_by_name(conn, name) is not None:
        raise Conflict(
            f"source {name!r} already exists", next_steps=["pick another name, or remove it first"]
        )
    source_id = source_rows.new_source_id()
    path = ctx.settings.repos_path / source_id
    private_dirs(path.parent)
    repo = ManagedRepo.clone(url, path, branch=branch, credentials=git_creds)
    row, targets, created, head, warnings = _register_clone(
        ctx, repo, path, source_id, name, branch, documents_root, flags, names
    )
    audit.record(
        ctx,
        actor=actor,
        action="source.add",
        target=name,
        result="ok",
        detail={"url": redact_url(row.url), "branch": branch, "indexes": targets},
    )
    out = {
        "Message": f"Source {name!r} added ({redact_url(row.url)} @ {branch}); feeds {', '.join(targets)}."
        " Run `gitkb source sync " + name + "` to index it.",
        "source": describe(ctx, source_rows.get_by_id(conn, source_id) or row),
        "indexes_created": created,
        "head_commit": head,
    }
    if warnings:
        out["Warnings"] = warnings
    return out


def _register_clone(
    ctx: Context,
    repo: ManagedRepo,
    path: Path,
    source_id: str,
    name: str,
    branch: str,
    documents_root: str,
    flags: dict[str, Any],
    names: list[str],
) -> tuple[SourceRow, list[str], list[str], str, list[str]]:
    """The fresh clone's source row and its indexes (created when missing: the given names, else the
    sidecar's index, else the source's name); the clone is removed when anything fails."""
    conn = ctx.catalog.conn
    warnings: list[str] = []
    try:
        head = repo.tracking_head(branch) or ""
        sidecar_index = None
        try:
            sidecar_index = read_source_sidecars(repo, head, documents_root).index
        except ValidationFailed as exc:
            warnings.append(f"{exc.message} (sync will fail until it is fixed)")
        targets = names or [sidecar_index or name]
        created = []
        with ctx.write_lock:
            for n in targets:
                if index_rows.get_by_name(conn, n) is None:
                    create_index(ctx, n)
                    created.append(n)
            with ctx.catalog.write() as w:
                row = source_rows.insert(
                    w,
                    source_id=source_id,
                    name=name,
                    url=repo.remote_url(),
                    branch=branch,
                    documents_root=documents_root.strip("/"),
                    settings=flags,
                )
                for n in targets:
                    ix = index_rows.get_by_name(w, n)
                    assert ix is not None
                    source_rows.link_index(w, source_id, ix.id)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return row, targets, created, head, warnings


def _source_settings(
    ctx: Context,
    *,
    documents_root: str,
    auth: Mapping[str, Any] | None,
    forge: Mapping[str, Any] | None,
    index: Any,
    include: Sequence[str],
    exclude: Sequence[str],
    credential: str | None,
) -> tuple[dict[str, Any], list[str]]:
    """The source's settings row (include/exclude globs, index names, forge, credential names),
    every part checked; and the index names it was given."""
    creds_.refuse_references(auth, "auth")
    creds_.refuse_references(forge, "forge")
    if auth and any(v not in (None, "") for v in dict(auth).values()):
        raise InvalidArgument(
            f"unknown auth setting(s) {', '.join(sorted(dict(auth)))}: credentials are named with "
            "credential = NAME from [[credentials]] of gitkb.toml"
        )
    documents_root_parts(documents_root)
    flags: dict[str, Any] = {}
    names = [index] if isinstance(index, str) else list(index or [])
    names = [validate_index_name(n, field="index") for n in names if n]
    if include:
        flags["include"] = list(check_globs(include, "include"))
    if exclude:
        flags["exclude"] = list(check_globs(exclude, "exclude"))
    if names:
        flags["index"] = names
    forge_cfg = _clean_refs(forge, FORGE_KEYS, "forge")
    if forge_cfg:
        kind = forge_cfg.setdefault("kind", "local")
        if kind not in FORGE_KINDS:
            raise InvalidArgument(f"forge kind must be one of {', '.join(FORGE_KINDS)}, got {kind!r}")
        if kind != "local" and not forge_cfg.get("repo"):
            raise InvalidArgument(f"a {kind} forge needs repo (GitHub 'owner/name', GitLab project path)")
        if kind == "local":
            forge_cfg.pop("credential", None)
        flags["forge"] = forge_cfg
    if credential not in (None, ""):
        flags["credential"] = creds_.find(ctx.settings, credential).name
    if forge_cfg.get("credential"):
        forge_cfg["credential"] = creds_.find(ctx.settings, forge_cfg["credential"]).name
    return flags, names


def describe(ctx: Context, row: SourceRow) -> dict[str, Any]:
    """What ``source list`` shows: references to credentials, never values."""
    conn = ctx.catalog.conn
    names = [ix.name for i in row.index_ids if (ix := index_rows.get_by_id(conn, i)) is not None]
    forge = dict(row.settings.get("forge") or {"kind": "local"})
    return {
        "name": row.name,
        "source_id": row.id,
        "url": redact_url(row.url),
        "branch": row.branch,
        "documents_root": row.documents_root,
        "indexes": names,
        "include": row.settings.get("include", []),
        "exclude": row.settings.get("exclude", []),
        "forge": forge,
        "credential": row.settings.get("credential"),
        "host": url_authority(row.url),
        "synced_commit": row.synced_commit,
        "synced_at": row.synced_at,
        "proposal_branch": proposal_branch(row),
    }


def proposal_branch(row: SourceRow) -> str:
    return f"gitkb/proposals/{row.name}"


def list_sources(ctx: Context, start: Any = None, count: Any = None) -> dict[str, Any]:
    page = page_of(start, count, default=100)
    every = source_rows.list_all(ctx.catalog.conn)
    rows, fields = paged(every, page)
    return {
        "Sources": [describe(ctx, r) for r in rows],
        **fields,
        "Message": f"{len(rows)} of {len(every)} source(s)",
    }


def remove_source(
    ctx: Context, name: Any, *, keep_documents: bool = False, actor: str = "operator"
) -> dict[str, Any]:
    """Forget a source: its clone, proposals and reviews; its documents too unless ``keep_documents``."""
    row = resolve_source(ctx, name)
    removed = 0
    with ctx.write_lock:
        with ctx.catalog.write() as w:
            if not keep_documents:
                for path in source_rows.files(w, row.id):
                    for index_id in row.index_ids:
                        doc = doc_rows.get_by_path(w, index_id, path)
                        if doc is not None and doc.origin == "git":
                            doc_rows.delete(w, doc.rowid)
                            removed += 1
            source_rows.delete(w, row.id)
        catch_up_keywords(ctx)
    shutil.rmtree(repo_path(ctx, row), ignore_errors=True)
    audit.record(
        ctx,
        actor=actor,
        action="source.remove",
        target=row.name,
        result="ok",
        detail={"documents_removed": removed},
    )
    return {
        "Message": f"Source {row.name!r} removed; {removed} document(s) removed from its indexes",
        "source": row.name,
        "documents_removed": removed,
    }
