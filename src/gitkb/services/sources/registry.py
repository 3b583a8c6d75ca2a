"""Register, list, resolve and remove git sources; open their managed clones and forges.

A source's clone is a bare repository at ``<home>/repos/<source id>``, owned
by gitkb (see :mod:`gitkb.stores.repos` for the guard hooks). What the source
row stores about credentials and forges are *references* -- an environment
variable name, a secrets file and key, an SSH key path -- never a value;
values are loaded when the network is used and redacted from every message.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from typing import Any

from gitkb.core.errors import Conflict, InvalidArgument, NotFound, ValidationFailed
from gitkb.core.names import validate_index_name
from gitkb.core.paging import page_of, paged
from gitkb.core.paths import documents_root_parts
from gitkb.forges import Forge, ForgeConfig, create_forge, load_secret
from gitkb.services import audit
from gitkb.services.context import Context
from gitkb.services.indexes import create_index
from gitkb.services.sources.selection import check_globs
from gitkb.services.sources.sidecars import SCHEMA_FILES, Sidecars, read_sidecars
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.git_auth import GitCredentials, check_url, redact_url
from gitkb.stores.repos import ManagedRepo

FORGE_KINDS = ("local", "github", "gitlab")
AUTH_KEYS = ("token_env", "secrets_file", "secrets_key", "username", "ssh_key")
FORGE_KEYS = (
    "kind",
    "repo",
    "api_url",
    "token_env",
    "secrets_file",
    "secrets_key",
    "app_id",
    "app_key_env",
    "installation_id",
)


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


def credentials_for(settings: Mapping[str, Any]) -> GitCredentials | None:
    auth = dict(settings.get("auth") or {})
    if not auth:
        return None
    token_env, secrets_file = auth.get("token_env"), auth.get("secrets_file")
    token = None
    if token_env or secrets_file:

        def token() -> str:
            return load_secret(token_env, secrets_file, auth.get("secrets_key") or "git_token").reveal()

    ssh_key = auth.get("ssh_key")
    from pathlib import Path

    return GitCredentials(
        token=token, username=auth.get("username"), ssh_key=Path(ssh_key) if ssh_key else None
    )


def open_repo(ctx: Context, row: SourceRow) -> ManagedRepo:
    """The source's managed clone (cloned again if it went missing)."""
    path = repo_path(ctx, row)
    creds = credentials_for(row.settings)
    if not path.exists():
        return ManagedRepo.clone(row.url, path, branch=row.branch, credentials=creds)
    return ManagedRepo.open(path, credentials=creds)


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


def forge_for(ctx: Context, row: SourceRow) -> Forge:
    cfg = dict(row.settings.get("forge") or {"kind": "local"})
    kind = cfg.get("kind") or "local"
    if kind == "local":
        return create_forge(ForgeConfig(kind="local", repo=row.url, options={"catalog": ctx.catalog}))
    token = app_key = None
    if cfg.get("app_id"):  # a GitHub App: its private key, from the environment or the secrets file
        app_key = load_secret(cfg.get("app_key_env"), cfg.get("secrets_file"), "github_app_key")
    else:
        token = load_secret(
            cfg.get("token_env"), cfg.get("secrets_file"), cfg.get("secrets_key") or f"{kind}_token"
        )
    return create_forge(
        ForgeConfig(
            kind=kind,
            repo=str(cfg.get("repo") or ""),
            api_url=cfg.get("api_url"),
            token=token,
            app_id=cfg.get("app_id"),
            app_private_key=app_key,
            installation_id=cfg.get("installation_id"),
        )
    )


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
    actor: str = "operator",
) -> dict[str, Any]:
    name = validate_index_name(name, field="source name")
    if not isinstance(url, str):
        raise InvalidArgument("url must be a string: a local path, file://, git://, https:// or ssh URL")
    check_url(url)
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
        has_secret = (
            forge_cfg.get("token_env") or forge_cfg.get("secrets_file") or forge_cfg.get("app_key_env")
        )
        if kind != "local" and not has_secret:
            raise InvalidArgument(
                f"a {kind} forge needs a credential reference: token_env (an environment variable name), or "
                "secrets_file (TOML, mode 0600) with secrets_key; a GitHub App: app_id with app_key_env or the "
                "secrets file's github_app_key"
            )
        flags["forge"] = forge_cfg
    auth_cfg = _clean_refs(auth, AUTH_KEYS, "auth")
    if auth_cfg:
        flags["auth"] = auth_cfg
    conn = ctx.catalog.conn
    if source_rows.get_by_name(conn, name) is not None:
        raise Conflict(
            f"source {name!r} already exists", next_steps=["pick another name, or remove it first"]
        )
    source_id = source_rows.new_source_id()
    path = ctx.settings.repos_path / source_id
    path.parent.mkdir(parents=True, exist_ok=True)
    repo = ManagedRepo.clone(url, path, branch=branch, credentials=credentials_for(flags))
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
    audit.record(ctx, actor=actor, action="source.add", target=name, result="ok",
                 detail={"url": redact_url(row.url), "branch": branch, "indexes": targets})  # fmt: skip
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
        "auth": {k: v for k, v in (row.settings.get("auth") or {}).items() if k in AUTH_KEYS},
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
    from gitkb.services.catchup import catch_up_keywords
    from gitkb.stores.catalog import documents as doc_rows

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
    audit.record(ctx, actor=actor, action="source.remove", target=row.name, result="ok",
                 detail={"documents_removed": removed})  # fmt: skip
    return {
        "Message": f"Source {row.name!r} removed; {removed} document(s) removed from its indexes",
        "source": row.name,
        "documents_removed": removed,
    }
