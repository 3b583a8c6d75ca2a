"""Apply a :class:`ChangePlan` of a source to the indexes it feeds.

Order inside a sync: deletions, then renames (the existing document row moves
to the new path with ``documents.rename``, so its id -- and the ids of its
unchanged chunks -- survive), then loads of added, modified and renamed
paths in batches of ``WRITE_BATCH`` documents, one catalog transaction each (crash point
``sync.after_batch``, core/faults.py, after each).
``documents.upsert`` keeps the chunk ids of unchanged text, so only new or
changed chunks enter the change log as ``add`` (and get embedded).

Idempotent: re-applying a plan after a crash finds renamed rows already
moved, deleted rows already gone and unchanged content skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gitkb.core import ids
from gitkb.core.change_planning import ChangePlan
from gitkb.core.chunk_config import resolve_config
from gitkb.core.chunking import chunk_many
from gitkb.core.exclusions import is_excluded
from gitkb.core.faults import crash_point
from gitkb.core.load_errors import LoadError
from gitkb.core.loading import load_bytes
from gitkb.core.models import ChunkConfig, ChunkSpan, LoadedText, SkippedFile
from gitkb.core.paths import unstorable_name
from gitkb.services.changes.sources.selection import EffectiveConfig
from gitkb.services.context import Context
from gitkb.services.derived import embeddings
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import skipped_files
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.engine import Conn
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.git_auth import redact_url
from gitkb.stores.repos import ManagedRepo

WRITE_BATCH = 256
Progress = Callable[..., None]


@dataclass
class ApplyReport:
    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    renamed: list[dict[str, str]] = field(default_factory=list)
    unchanged: int = 0
    unchanged_paths: list[str] = field(default_factory=list)  # those ``unchanged`` counts (not in as_dict)
    skipped: list[SkippedFile] = field(default_factory=list)
    chunks_written: int = 0
    warnings: list[str] = field(default_factory=list)  # from embeddings.after_write, per index
    chunk_tokens: dict[str, list[int]] = field(default_factory=dict)  # index id -> tokens of chunks written

    def as_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "modified": self.modified,
            "deleted": self.deleted,
            "renamed": self.renamed,
            "skipped": [s.as_dict() for s in self.skipped],
            "counts": {
                "added": len(self.added),
                "modified": len(self.modified),
                "deleted": len(self.deleted),
                "renamed": len(self.renamed),
                "unchanged": self.unchanged,
                "skipped": len(self.skipped),
            },
            "chunks_written": self.chunks_written,
        }


def source_uri(row: SourceRow, commit: str, path: str) -> str:
    return f"git+{redact_url(row.url)}@{commit}:{path}"


def apply_plan(
    ctx: Context,
    row: SourceRow,
    repo: ManagedRepo,
    commit: str,
    plan: ChangePlan,
    tree: Mapping[str, str],
    cfg: EffectiveConfig,
    *,
    reload: Iterable[str] = (),
    progress: Progress | None = None,
) -> ApplyReport:
    """Write ``plan`` (computed against ``tree``, the selected ``path -> blob`` map at ``commit``).

    Tree entries whose name cannot be stored (``TreeMap.skipped``) are reported
    as skipped (and kept in status ``skipped_files``); the rest of the commit is
    indexed. A plan path that is not in ``tree`` (a tree diff also sees such
    names) is never loaded.
    """
    report = ApplyReport()
    plan = storable_plan(plan, tree)
    bad = _bad_entries(repo, commit, cfg)
    report.skipped.extend(bad)
    conn = ctx.catalog.conn
    targets = [ix for i in row.index_ids if (ix := index_rows.get_by_id(conn, i)) is not None]
    configs = {
        ix.id: resolve_config(
            cfg.chunk_strategy, cfg.chunk_size, cfg.chunk_overlap, defaults=ix.chunk_defaults
        )[0]
        for ix in targets
    }
    for ix in targets:  # as every ingest: refused during a RECHUNK, fails closed, binds the index
        embeddings.prepare_write(ctx, ix)
    rename_targets = {new for _, new in plan.renamed}
    with ctx.catalog.write() as w:
        for path in plan.deleted:
            for ix in targets:
                doc = doc_rows.get_by_path(w, ix.id, path)
                if doc is not None:
                    doc_rows.delete(w, doc.rowid)
            report.deleted.append(path)
        source_rows.drop_files(w, row.id, plan.deleted)
        for old, new in plan.renamed:
            for ix in targets:
                doc_old = doc_rows.get_by_path(w, ix.id, old)
                if doc_old is None:
                    continue
                if doc_rows.get_by_path(w, ix.id, new) is None:
                    doc_rows.rename(w, doc_old.rowid, new)
                else:
                    doc_rows.delete(w, doc_old.rowid)
            report.renamed.append({"old_path": old, "path": new})
        source_rows.drop_files(w, row.id, [old for old, _ in plan.renamed])
    reload_set = {p for p in reload if p in tree}
    loads = sorted({*plan.paths_to_load, *reload_set})
    added = set(plan.added)
    forced = rename_targets | reload_set
    total = len(loads)
    for start in range(0, total, WRITE_BATCH):
        batch = loads[start : start + WRITE_BATCH]
        _load_batch(
            ctx, row, repo, commit, batch, tree, cfg, targets, configs, forced, rename_targets, added, report
        )
        crash_point("sync.after_batch")  # the crash tests: a batch committed, the sync not recorded
        if progress is not None:
            progress(min(start + WRITE_BATCH, total), total)
    with ctx.catalog.write() as w:  # every sync lists the tree's bad names anew: drop the ones gone
        for ix in targets:
            skipped_files.forget(w, ix.id, "bad_name", keep=[s.path for s in bad])
            skipped_files.record(w, ix.id, bad, ok=[])
    for ix in targets:  # wake the embedder: the new chunks get their vectors in the background
        report.warnings.extend(embeddings.after_write(ctx, ix, report.chunk_tokens.get(ix.id, [])))
    return report


def storable_plan(plan: ChangePlan, tree: Mapping[str, str]) -> ChangePlan:
    """``plan`` without the paths it cannot load: not in ``tree``, or a name that cannot be stored."""

    def fine(path: str) -> bool:
        return all(unstorable_name(seg) is None for seg in path.split("/"))

    renamed = [(old, new) for old, new in plan.renamed if new in tree and fine(old)]
    gone = [old for old, new in plan.renamed if new not in tree and fine(old)]  # renamed to a bad name
    return ChangePlan(
        added=tuple(p for p in plan.added if p in tree),
        modified=tuple(p for p in plan.modified if p in tree),
        deleted=tuple(sorted({*(p for p in plan.deleted if fine(p)), *gone})),
        renamed=tuple(renamed),
    )


def _bad_entries(repo: ManagedRepo, commit: str, cfg: EffectiveConfig) -> list[SkippedFile]:
    """The selected tree entries at ``commit`` whose names cannot be stored (shown escaped)."""
    found = repo.tree_map(commit, cfg.documents_root).skipped  # cached: sync listed this tree already
    out = []
    for skip in found:
        rel = cfg.relative(skip.path)
        if rel is None or is_excluded(rel, cfg.exclude):
            continue
        out.append(skip)
    return out


def _load_batch(
    ctx: Context,
    row: SourceRow,
    repo: ManagedRepo,
    commit: str,
    batch: list[str],
    tree: Mapping[str, str],
    cfg: EffectiveConfig,
    targets: list[index_rows.IndexRow],
    configs: Mapping[str, ChunkConfig],
    forced: set[str],
    renames: set[str],
    added: set[str],
    report: ApplyReport,
) -> None:
    """``forced``: paths loaded even when unchanged (rename targets, reloads after a config change)."""
    conn = ctx.catalog.conn
    loaded: list[tuple[str, bytes, str, LoadedText]] = []
    batch_set = set(batch)
    stale: list[str] = []
    quiet: set[str] = set()  # loaded again, but their content did not change
    for path in batch:
        data = repo.read_blob_sha(tree[path])
        h = ids.bytes_hash(data)
        if all(_unchanged(conn, ix.id, path, h, configs[ix.id]) for ix in targets):
            if path not in forced:
                report.unchanged += 1
                report.unchanged_paths.append(path)
                continue
            quiet.add(path)
        try:
            text = load_bytes(path, data, required_frontmatter=cfg.required_frontmatter)
        except LoadError as exc:
            report.skipped.append(SkippedFile(path, exc.category, exc.detail))
            stale.append(path)
            continue
        loaded.append((path, data, h, text))
    work = [(text.text, configs[ix.id], text.kind == "markdown") for *_, text in loaded for ix in targets]
    spans = iter(chunk_many(work)) if work else iter(())
    with ctx.catalog.write() as w:
        for path in stale:  # a file that no longer loads must not leave its old text searchable
            for ix in targets:
                doc = doc_rows.get_by_path(w, ix.id, path)
                if doc is not None:
                    doc_rows.delete(w, doc.rowid)
        for path, data, h, text in loaded:
            status = "added"
            for ix in targets:
                chunks = next(spans)
                status, _ = doc_rows.upsert(
                    w, _git_document(row, commit, tree, ix, configs, path, data, h, text, chunks)
                )
                report.chunks_written += len(chunks)
                report.chunk_tokens.setdefault(ix.id, []).extend(c.token_count for c in chunks)
            if path in renames:
                continue
            if path in quiet:
                report.unchanged += 1
                report.unchanged_paths.append(path)
                continue
            (report.added if path in added or status == "added" else report.modified).append(path)
        source_rows.put_files(w, row.id, [(p, tree[p]) for p in batch])
        # skip reasons feed get_index_status; a path that loads again is cleared
        skips = [sk for sk in report.skipped if sk.path in batch_set]
        for ix in targets:
            skipped_files.record(w, ix.id, skips, ok=[p for p, *_ in loaded])


def _git_document(
    row: SourceRow,
    commit: str,
    tree: Mapping[str, str],
    ix: index_rows.IndexRow,
    configs: Mapping[str, ChunkConfig],
    path: str,
    data: bytes,
    h: str,
    text: LoadedText,
    chunks: list[ChunkSpan],
) -> doc_rows.NewDocument:
    """A file of the source at ``commit`` as a document of index ``ix`` (its metadata says where it came from)."""
    return doc_rows.NewDocument(
        index_id=ix.id,
        path=path,
        text=text.text,
        content_hash=h,
        size=len(data),
        kind=text.kind,
        origin="git",
        chunks=chunks,
        chunk_config=configs[ix.id],
        title=text.title,
        origin_path=path,
        source_uri=source_uri(row, commit, path),
        metadata={
            **text.metadata,
            "gitkb_source": {"source": row.name, "branch": row.branch, "commit": commit, "blob": tree[path]},
        },
    )


def _unchanged(conn: Conn, index_id: str, path: str, content_hash: str, cfg: ChunkConfig) -> bool:
    doc = doc_rows.get_by_path(conn, index_id, path)
    return (
        doc is not None
        and doc.origin == "git"
        and doc.content_hash == content_hash
        and doc.chunk_config == cfg
    )
