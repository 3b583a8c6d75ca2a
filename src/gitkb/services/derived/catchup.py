"""Derived indexes catch up with the catalog's change log.

The keyword index reads change-log entries after its watermark, applies them
idempotently (every cid touched is deleted, then re-added from the catalog if
the chunk still exists), commits, then stores the new watermark. A crash
between the tantivy commit and the watermark only means re-applying.

A big ingest also *feeds* the keyword index batch by batch (``feed_keywords``:
applied, not committed) while the next batch is being chunked, so the final
catch-up only commits. Fed but uncommitted entries are invisible to searches and
are lost by a crash like any uncommitted write: the watermark has not moved, so
they are applied again. Once ``FEED_COMMIT_EVERY`` entries are fed, the feed
starts committing them on a thread of its own (``KeywordIndex.start_commit``), while the
writer writes the next batch and the chunker chunks more: tantivy's commit serialises what was fed
(~0.34 s of CPU for awsdocs' 31k chunks), and left to the final catch-up all of
it would run after the last batch, on nobody else's time; waited for by the writer, the chunker
ran out of batches. The next feed (or catch-up) waits for that commit, then moves the watermark
to what it made durable. A search meanwhile
sees chunks that the catalog already holds, as after any catch-up.

Each gitkb index has a tantivy index of its own (``<home>/keywords/<index id>/``, see
``stores.keywords``): its BM25 statistics are its own, whatever else the home holds. A batch
touching several indexes commits each of them, then moves the one watermark: a crash between two
of those commits applies the batch again, idempotent by cid. A home still holding the old single
index (``keywords/meta.json``) is rebuilt from the catalog into that layout by the first catch-up.

Each node keeps its own keyword index under its own home, with its own watermark
(``ctx.keywords_mark``: ``keywords`` for the home holding the catalog file, ``keywords@<node>`` for a
node sharing a catalog). When the writer compacted the change log past a node's watermark
(``stores.node_rows``), the node cannot catch up from the log: it rebuilds from the catalog instead.

A keyword index whose files cannot be opened (``KeywordIndex.damage``) is skipped: the catalog
write goes on, the watermark stays, searches and status name ``gitkb verify --repair``, and the
rebuild that repair runs applies everything.

An ingest run by the writer hands the feed what it just wrote (``Written``: the chunk texts and heading
paths of each document, and the change-log seqs of that write): a chunk whose every pending entry lies
in that range, and nothing newer is pending, takes its text, heading path and document's title and
tenant from there (what that write set, and nothing changed them since); the catalog still says which
chunk a cid is (index, document, ordinal: ``keyword_keys``, without the ~25 MB of text on awsdocs).
When that write only added new documents and nothing before it is pending (a first ingest), the
write also hands the cids it logged (``WrittenDocument.cids``, by ordinal) and the feed reads
nothing back at all, neither the log nor ``keyword_keys``. Anything else, and every catch-up, reads the catalog.

RECHUNK switches an index's keyword entries from the old chunks to the rebuilt
ones in one tantivy commit just before its catalog swap (``switch_keywords``):
a search sees one generation or the other, never neither. Between that commit
and the swap the new chunks still belong to the hidden temporary index in the
catalog; ``rebuild_aliases`` lets a search count them as the index's own.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace

from gitkb.core.errors import StoreUnavailable
from gitkb.core.faults import crash_point
from gitkb.services.context import Context
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import vector_state as vs
from gitkb.stores.catalog.documents import chunk_index_ids, keyword_keys, keyword_rows
from gitkb.stores.catalog.engine import Conn
from gitkb.stores.keyword_schema import KeywordDoc
from gitkb.stores.node_rows import floor as compacted_floor

KEYWORDS = "keywords"
BATCH = 20000
# Fed entries the feed commits at once: a few tantivy segments per big ingest (tantivy merges
# from 8 on), most of the serialising done before the last batch.
FEED_COMMIT_EVERY = 12000


def keyword_title(doc_title: str | None, heading_path: tuple[str, ...]) -> str:
    parts = [doc_title or ""] + [h for h in heading_path if h and h != doc_title]
    return " / ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class WrittenDocument:
    """One document as that write left it: its index, tenant, title and (text, heading path) by ordinal."""

    index_id: str
    tenant: str | None
    title: str | None
    chunks: list[tuple[str, tuple[str, ...]]]
    # a new document: its chunks' cids by ordinal, each logged once as an add, nothing else logged
    cids: list[int] | None = None


@dataclass(frozen=True, slots=True)
class Written:
    """What one write of an ingest put in the catalog: change-log entries ``after`` < seq <= ``upto``,
    and each document it wrote, by document rowid."""

    after: int
    upto: int
    docs: dict[int, WrittenDocument]


def _handed(batch: list[changes.Change], written: Written | None) -> set[int]:
    """The cids of ``batch`` whose text ``written`` holds: every entry of theirs is from that write,
    and nothing written after it is pending (it could have changed them since)."""
    if written is None or not batch or batch[-1].seq > written.upto:
        return set()
    inside: set[int] = set()
    outside: set[int] = set()
    for c in batch:
        if c.cid is not None:
            (inside if c.op == "add" and c.seq > written.after else outside).add(c.cid)
    return inside - outside


def _keyword_docs(
    conn: Conn, cids: list[int], written: Written | None = None, handed: set[int] | None = None
) -> list[KeywordDoc]:
    # The chunks of a document share its title and mostly a few heading paths: each keyword
    # title is made once per (title, heading path), not once per chunk.
    titles: dict[tuple[str | None, object], str] = {}
    out = []
    rest = cids
    if written is not None and handed:
        rest = []
        for cid, index_id, document_rowid, ordinal in keyword_keys(conn, [c for c in cids if c in handed]):
            doc = written.docs.get(document_rowid)
            if doc is None or doc.index_id != index_id or ordinal >= len(doc.chunks):  # not from that write
                rest.append(cid)
                continue
            text, heading = doc.chunks[ordinal]
            tenant, title = doc.tenant, doc.title
            kt = titles.get((title, heading))
            if kt is None:
                kt = titles[(title, heading)] = keyword_title(title, heading)
            out.append(KeywordDoc(cid, index_id, tenant, kt, text))
        rest += [c for c in cids if c not in handed]
        rest.sort()
    for cid, index_id, tenant, title, heading_json, text in keyword_rows(conn, rest):
        kt = titles.get((title, heading_json))
        if kt is None:
            kt = titles[(title, heading_json)] = keyword_title(title, tuple(json.loads(heading_json)))
        out.append(KeywordDoc(cid, index_id, tenant, kt, text))
    if rest is not cids:
        out.sort(key=lambda d: d.cid)
    return out


def _new_keyword_docs(written: Written | None, fed: int) -> list[KeywordDoc] | None:
    """The keyword docs of ``written`` made from it alone, when nothing before it is pending and its
    entries are exactly the adds of its new documents' chunks (then nothing needs reading back: not
    the log, not which chunk a cid is); None otherwise."""
    if written is None or fed != written.after:
        return None
    docs = list(written.docs.values())
    if any(d.cids is None or len(d.cids) != len(d.chunks) for d in docs):
        return None
    if sum(len(d.cids or ()) for d in docs) != written.upto - written.after:
        return None
    titles: dict[tuple[str | None, tuple[str, ...]], str] = {}
    out = []
    for d in docs:
        for cid, (text, heading) in zip(d.cids or (), d.chunks, strict=True):
            kt = titles.get((d.title, heading))
            if kt is None:
                kt = titles[(d.title, heading)] = keyword_title(d.title, heading)
            out.append(KeywordDoc(cid, d.index_id, d.tenant, kt, text))
    out.sort(key=lambda k: k.cid)
    return out


def _apply(ctx: Context, conn: Conn, batch: list[changes.Change], written: Written | None = None) -> None:
    drops = [c.index_id for c in batch if c.op == "drop_index" and c.index_id]
    cids = sorted({c.cid for c in batch if c.cid is not None})
    adds = _keyword_docs(conn, cids, written, _handed(batch, written))
    ctx.keywords.apply(removes=cids, adds=adds, drop_indexes=drops)


def _behind_floor(ctx: Context) -> bool:
    """The log was compacted past this node's watermark (and past what was fed): rebuild, don't catch up."""
    conn = ctx.catalog.conn
    wm = max(ctx.caches.keywords_fed or 0, changes.watermark(conn, ctx.keywords_mark))
    return wm < compacted_floor(conn)


def _must_rebuild(ctx: Context) -> bool:
    """Rebuild from the catalog rather than catch up: the log was compacted past the watermark, or the
    home still has the old single keyword index of every gitkb index, or a rebuild did not finish
    (``KeywordIndex.needs_rebuild``)."""
    return ctx.keywords.needs_rebuild or _behind_floor(ctx)


def feed_keywords(ctx: Context, written: Written | None = None) -> None:
    """Apply, without committing, the change-log entries past the watermark (or past what was
    fed before); the next ``catch_up_keywords`` commits them and moves the watermark, or this feed
    does once ``FEED_COMMIT_EVERY`` entries wait. ``written``: the texts the ingest's last write
    holds (see the module's docstring)."""
    if ctx.keywords.damage is not None:  # repair rebuilds it from the catalog
        return
    if _must_rebuild(ctx):
        rebuild_keywords(ctx)
        return
    with ctx.keyword_lock:
        conn = ctx.catalog.conn
        _finish_commit(ctx)
        wm = changes.watermark(conn, ctx.keywords_mark)
        fed = max(ctx.caches.keywords_fed or 0, wm)
        new = _new_keyword_docs(written, fed)
        if new is not None and written is not None:
            ctx.keywords.apply(removes=[], adds=new)  # each of their cids is deleted first all the same
            fed = written.upto
        while batch := changes.since(conn, fed, BATCH):
            _apply(ctx, conn, batch, written)
            fed = batch[-1].seq
        ctx.caches.keywords_fed = fed
        if fed - wm >= FEED_COMMIT_EVERY:  # committed on tantivy's time while the next batch is written
            ctx.keywords.start_commit(fed)


def _finish_commit(ctx: Context) -> None:
    """Wait for the feed's commit still running (``KeywordIndex.start_commit``) and move the watermark
    to what it made durable."""
    try:
        done = ctx.keywords.finish_commit()
    except Exception:
        ctx.caches.keywords_fed = None  # what that commit held is applied again, from the watermark
        raise
    if done is None:
        return
    crash_point("keywords.after_commit")
    with ctx.catalog.write() as w:
        if changes.watermark(w, ctx.keywords_mark) < done:
            changes.set_watermark(w, ctx.keywords_mark, done)
    if ctx.caches.keywords_fed == done:
        ctx.caches.keywords_fed = None


def catch_up_keywords(ctx: Context) -> int:
    """Apply every pending change to the keyword index; returns entries applied."""
    if ctx.keywords.damage is not None:  # repair rebuilds it from the catalog
        return 0
    if _must_rebuild(ctx):
        return rebuild_keywords(ctx)
    applied = 0
    with ctx.keyword_lock:
        conn = ctx.catalog.conn
        _finish_commit(ctx)
        wm = changes.watermark(conn, ctx.keywords_mark)
        fed, ctx.caches.keywords_fed = ctx.caches.keywords_fed, None
        if fed is not None and fed > wm:  # fed earlier: commit it first
            ctx.keywords.commit()
            crash_point("keywords.after_commit")
            with ctx.catalog.write() as w:
                changes.set_watermark(w, ctx.keywords_mark, fed)
            wm = fed
        while True:
            batch = changes.since(conn, wm, BATCH)
            if not batch:
                break
            _apply(ctx, conn, batch)
            ctx.keywords.commit()
            crash_point("keywords.after_commit")
            wm = batch[-1].seq
            with ctx.catalog.write() as w:
                changes.set_watermark(w, ctx.keywords_mark, wm)
            applied += len(batch)
    return applied


def switch_keywords(ctx: Context, index_id: str, old_cids: list[int], new_cids: list[int]) -> None:
    """In one keyword commit: ``old_cids`` go, ``new_cids`` come in filed under ``index_id`` (whatever index
    the catalog holds them in now). Idempotent; the change log is applied again afterwards as usual."""
    with ctx.keyword_lock:
        adds = [replace(d, index_id=index_id) for d in _keyword_docs(ctx.catalog.conn, new_cids)]
        ctx.keywords.apply(removes=old_cids, adds=adds)
        ctx.keywords.commit()


def rebuild_aliases(conn: Conn, index_ids: Iterable[str]) -> dict[str, str]:
    """The temporary index of each of ``index_ids`` that RECHUNK is rebuilding: temp index id -> index id.
    Read it before the keyword search, so a hit found there and not yet swapped still counts."""
    out = {}
    for ix in index_ids:
        rb = vs.get_rebuild(conn, ix)
        if rb is not None:
            out[rb.temp_index_id] = ix
    return out


def rebuild_keywords(ctx: Context) -> int:
    """Drop the keyword index and rebuild it from the catalog."""
    with ctx.keyword_lock:
        with contextlib.suppress(StoreUnavailable, ValueError, OSError):  # failed: rebuilt all the same
            ctx.keywords.finish_commit()  # a feed's commit: the rebuild sets the watermark itself
        ctx.caches.keywords_fed = None  # whatever was fed is dropped with the rest
        ctx.keywords.clear()
        ctx.keywords.mark_rebuilding(True)  # killed before the watermark moves: rebuilt again
        conn = ctx.catalog.conn
        head = changes.head(conn)
        by_index: dict[str, list[int]] = {}
        for cid, ix in sorted(chunk_index_ids(conn).items()):
            by_index.setdefault(ix, []).append(cid)
        # One index at a time, each committed before the next: one tantivy writer (its heap, its
        # thread) at a time, however many indexes the home has (the mark covers a kill between two).
        for ix in sorted(by_index):
            cids = by_index[ix]
            for i in range(0, len(cids), BATCH):
                ctx.keywords.apply(removes=[], adds=_keyword_docs(conn, cids[i : i + BATCH]))
            crash_point("keywords.rebuild_before_commit")
            ctx.keywords.commit()
        with ctx.catalog.write() as w:
            changes.set_watermark(w, ctx.keywords_mark, head)
        ctx.keywords.mark_rebuilding(False)
    return sum(len(c) for c in by_index.values())


def refeed_keywords(ctx: Context, add_cids: Iterable[int], remove_cids: Iterable[int]) -> None:
    """Repair: (re)add ``add_cids`` from the catalog and delete ``remove_cids``, in one commit.
    Idempotent by cid like every keyword write; the watermark does not move."""
    with ctx.keyword_lock:
        adds = sorted(set(add_cids))
        ctx.keywords.apply(removes=sorted(set(remove_cids)), adds=_keyword_docs(ctx.catalog.conn, adds))
        ctx.keywords.commit()
