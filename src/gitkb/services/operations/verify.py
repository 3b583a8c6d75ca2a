"""Verify and repair: do the derived stores still agree with the catalog?

``verify`` compares, without writing anything:

* the catalog's chunks with the keyword index (``keyword_missing``, ``keyword_orphan``,
  ``keyword_duplicate``, ``keyword_misfiled``: kept in another index's folder;
  ``keyword_orphan_folder``: the folder of an index the catalog no longer has, left by a crash
  between a drop's catalog commit and its keyword catch-up; ``keyword_index_unreadable`` when
  tantivy cannot open the files of some index's folder);
* the chunks of each index bound to an embedding identity with that identity's collection
  (``vector_missing``, ``vector_orphan``, ``vector_fingerprint``: a vector whose fingerprint is not
  its collection's), and collections no index is bound to (``unused_collection``);
* each source's managed clone (``clone_missing``: gone or not a git repository; ``clone_behind``:
  it lacks the commit the catalog says was synced; ``clone_orphan``: a clone no source owns) -- in
  the writer's home only: on a node with its own home that does not hold the writer lease the clones
  are a cache the next writer fetches into, never behind in any way that matters;
* the change-log watermarks (``watermark_ahead``: past the log's head).

Change-log entries past a store's watermark are not yet applied by design: the chunks they touch
are left out of that store's comparison (they are ``pending``, not differences).

``repair`` fixes what the derived stores can: re-feeds missing keyword entries and deletes orphan
and duplicate ones (or rebuilds an unreadable keyword index from the catalog), deletes orphan
vectors and vectors of a wrong fingerprint, re-embeds missing vectors through the usual catch-up
(a ``reembed_index`` entry for each index missing some, then ``build_embeddings``: chunks that
have a vector are skipped), drops unused collections, re-clones missing clones and fetches those
behind. An orphan clone is only reported: it may hold work nobody else has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gitkb.core.errors import GitkbError, NotFound
from gitkb.core.faults import pause_point
from gitkb.services.context import Context
from gitkb.services.derived import catchup
from gitkb.services.derived.vector_wants import live_bindings, watermark_name
from gitkb.services.operations import verify_clones, verify_rechunk
from gitkb.services.operations.verify_report import Difference, difference
from gitkb.services.runtime import jobs
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import vector_state as vs
from gitkb.stores.catalog.sources import SourceRow


def _scope(ctx: Context, index_name: str | None) -> set[str] | None:
    """The index ids checked (None: all of them, and the workspace-wide checks too)."""
    if index_name is None:
        return None
    row = index_rows.get_by_name(ctx.catalog.conn, index_name)
    if row is None:
        raise NotFound(f"no index {index_name!r}", next_steps=["list them with `gitkb index list`"])
    return {row.id}


def _check_keywords(
    ctx: Context, only: set[str] | None, chunks: dict[int, str], seen: Seen
) -> list[Difference]:
    conn = ctx.catalog.conn
    try:
        by_folder = ctx.keywords.cids_by_index()
    except GitkbError as exc:
        return [Difference("keyword_index_unreadable", "keywords", 1, exc.message)]
    stored = {cid: n for held in by_folder.values() for cid, n in held.items()}
    head = changes.head(conn)
    wm = seen.marks.get(ctx.keywords_mark, 0)  # read before the stores: what changed since is pending
    pending_cids, pending_ix = changes.touched_since(conn, min(wm, head))
    seen.rebuilds.update(verify_rechunk.rebuilds(ctx))  # and after: one that began meanwhile counts
    temps = {rb.temp_index_id for rb in seen.rebuilds.values()}
    # An index RECHUNK rebuilds: the keyword index holds one generation of it or the other.
    skip_ix = pending_ix | temps | set(seen.rebuilds)
    want = {c for c, ix in chunks.items() if (only is None or ix in only) and ix not in skip_ix}
    want -= pending_cids
    out = [
        difference(
            "keyword_missing",
            "keywords",
            want - set(stored),
            "chunks of the catalog the keyword index lacks",
            index_ids=sorted({chunks[c] for c in want - set(stored)}),
        ),
        difference(
            "keyword_duplicate",
            "keywords",
            (c for c, n in stored.items() if n > 1 and c in want),
            "chunks the keyword index holds more than once",
        ),
    ]
    # (a RECHUNK's rebuilt chunks, filed under the index they replace before the swap, are not in ``want``)
    out.append(
        difference(
            "keyword_misfiled",
            "keywords",
            (c for ix, held in by_folder.items() for c in held if c in want and chunks[c] != ix),
            "chunks kept in another index's keyword folder (scored with that index's statistics)",
        )
    )
    if only is None:
        known = {row.id for row in index_rows.list_all(conn, include_hidden=True)}
        out.append(
            difference(
                "keyword_orphan_folder",
                "keywords",
                (ix for ix in ctx.keywords.folders() if ix not in known and ix not in pending_ix),
                "keyword index folders of indexes the catalog no longer has",
            )
        )
        in_rebuild = {c for c, ix in chunks.items() if ix in temps or ix in seen.rebuilds}
        out.append(
            difference(
                "keyword_orphan",
                "keywords",
                set(stored) - set(chunks) - pending_cids - in_rebuild,
                "keyword entries of chunks the catalog no longer has",
            )
        )
    return [d for d in out if d is not None]


def _check_vectors(
    ctx: Context, only: set[str] | None, chunks: dict[int, str], seen: Seen
) -> list[Difference]:
    conn = ctx.catalog.conn
    head = changes.head(conn)
    temps = {rb.temp_index_id for rb in seen.rebuilds.values()}
    live = live_bindings(ctx)
    bound = vs.bindings(conn)  # stranded ones too: their vectors stay until the re-embed
    store = ctx.vectors
    try:
        collections = store.list_collections()
    except GitkbError as exc:
        return [Difference("vector_store_unavailable", "vectors", 1, exc.message, repairable=False)]
    out: list[Difference | None] = []
    for identity in sorted({b.identity for b in bound.values()} | {c["identity"] for c in collections}):
        name = f"vectors:{identity}"
        ixs = {ix for ix, b in bound.items() if b.identity == identity}
        live_ixs = {ix for ix, b in live.items() if b.identity == identity}
        if not ixs:
            if only is None:
                count = next(c["count"] for c in collections if c["identity"] == identity)
                out.append(
                    Difference(
                        "unused_collection",
                        name,
                        1,
                        f"no index is bound to this collection ({count} vectors)",
                        [identity],
                        items=[identity],
                    )
                )
            continue
        wm = seen.marks.get(watermark_name(identity), 0)
        pending_cids, pending_ix = changes.touched_since(conn, min(wm, head))
        if only is not None:
            live_ixs &= only
            ixs &= only
            if not ixs:
                continue
        have_meta = _vector_metadata(ctx, identity, ixs if only is not None else None)
        have = set(have_meta)
        want = {str(c) for c, ix in chunks.items() if ix in live_ixs and ix not in pending_ix | temps}
        want -= {str(c) for c in pending_cids}
        missing = want - have
        out.append(
            difference(
                "vector_missing",
                name,
                missing,
                "chunks of indexes bound to this identity without a vector",
                index_ids=sorted({chunks[int(c)] for c in missing}),
            )
        )
        known = {str(c) for c, ix in chunks.items() if ix in ixs or ix in temps}
        out.append(
            difference(
                "vector_orphan",
                name,
                have - known - {str(c) for c in pending_cids},
                "vectors of chunks the catalog does not have in an index bound to this identity",
            )
        )
        fp = store.fingerprint_of(identity)
        out.append(
            difference(
                "vector_fingerprint",
                name,
                (i for i, m in have_meta.items() if m.get("fingerprint") != fp),
                f"vectors whose fingerprint is not their collection's ({fp})",
            )
        )
    return [d for d in out if d is not None]


def _vector_metadata(ctx: Context, identity: str, ixs: set[str] | None) -> dict[str, dict[str, Any]]:
    store = ctx.vectors
    if ixs is None:
        ids = store.ids_in(identity)
    else:
        ids = set().union(*(store.ids_in(identity, {"index_id": ix}) for ix in sorted(ixs)))
    meta: dict[str, dict[str, Any]] = store.get_metadata(identity, sorted(ids))
    return meta


def _check_watermarks(ctx: Context) -> list[Difference]:
    conn = ctx.catalog.conn
    head = changes.head(conn)
    ahead = [n for n, seq in changes.watermarks(conn).items() if seq > head]
    d = difference("watermark_ahead", "watermarks", ahead, f"watermarks past the change log's head ({head})")
    return [] if d is None else [d]


@dataclass
class Seen:
    """Read before the catalog's chunks and the derived stores: the watermarks (a change after them
    is pending, left out, whenever the stores are read) and RECHUNK's rebuilds (read again after)."""

    marks: dict[str, int]
    rebuilds: dict[str, vs.Rebuild]


def check(ctx: Context, index_name: str | None = None) -> list[Difference]:
    """Every difference between the catalog and the derived stores (no writes)."""
    return checked(ctx, index_name)[0]


def checked(ctx: Context, index_name: str | None = None) -> tuple[list[Difference], list[dict[str, Any]]]:
    """``check``, and the indexes RECHUNK is rebuilding (``verify_rechunk.report``)."""
    only = _scope(ctx, index_name)
    seen = Seen(changes.watermarks(ctx.catalog.conn), verify_rechunk.rebuilds(ctx))
    chunks = doc_rows.chunk_index_ids(ctx.catalog.conn)
    pause_point("verify.chunks_read")  # tests: a write between this read and the stores'
    found = _check_keywords(ctx, only, chunks, seen) + _check_vectors(ctx, only, chunks, seen)
    mine = {ix: rb for ix, rb in seen.rebuilds.items() if only is None or ix in only}
    rebuilding, interrupted = verify_rechunk.report(ctx, mine, verify_rechunk.interrupted(ctx, mine))
    found = interrupted + found
    if only is None:
        found += (
            verify_clones.check_clones(ctx) if verify_clones.clones_here(ctx) else []
        ) + _check_watermarks(ctx)
    return found, rebuilding


def _repair(
    ctx: Context, found: list[Difference], reachable: Callable[[SourceRow], bool] | None = None
) -> list[str]:
    """Fix what can be fixed; what was done, one line each."""
    done: list[str] = []
    by_kind: dict[str, list[Difference]] = {}
    for d in found:
        by_kind.setdefault(d.kind, []).append(d)
    done += verify_rechunk.repair(ctx, by_kind)  # first: it gives the keyword index its chunks back
    conn = ctx.catalog.conn
    head = changes.head(conn)
    for d in by_kind.get("watermark_ahead", []):
        with ctx.catalog.write() as w:
            for name in d.items:
                changes.set_watermark(w, name, head)
        done.append(f"set {d.count} watermark(s) back to the log's head ({head}): {', '.join(d.items)}")
    if "keyword_index_unreadable" in by_kind or any(
        n == ctx.keywords_mark for d in by_kind.get("watermark_ahead", []) for n in d.items
    ):
        with ctx.keyword_lock:
            ctx.keywords.reset()
        n = catchup.rebuild_keywords(ctx)
        done.append(f"rebuilt the keyword index from the catalog ({n} chunks)")
    else:
        adds = [
            c
            for kind in ("keyword_missing", "keyword_duplicate", "keyword_misfiled")
            for d in by_kind.get(kind, [])
            for c in d.items
        ]
        removes = [c for d in by_kind.get("keyword_orphan", []) for c in d.items]
        if adds or removes:
            catchup.refeed_keywords(ctx, adds, removes)
            done.append(f"keyword index: re-fed {len(adds)} entries, deleted {len(removes)} orphan entries")
    for d in by_kind.get("keyword_orphan_folder", []):
        with ctx.keyword_lock:
            for ix in d.items:
                ctx.keywords.drop_folder(ix)
        done.append(f"keyword index: removed {d.count} orphan folder(s): {', '.join(d.items)}")
    for kind in ("vector_orphan", "vector_fingerprint"):
        for d in by_kind.get(kind, []):
            identity = d.store.split(":", 1)[1]
            ctx.vectors.delete(identity, d.items)
            done.append(f"{d.store}: deleted {d.count} {kind.replace('_', ' ')} vectors")
    reembed: set[str] = set()
    for d in by_kind.get("vector_missing", []):
        reembed.update(d.index_ids)
    for d in by_kind.get("vector_fingerprint", []):
        reembed.update(doc_rows.chunk_index_ids(conn).get(int(i), "") for i in d.items if i.isdigit())
    for d in by_kind.get("watermark_ahead", []):
        for name in d.items:
            if name.startswith("vectors:"):
                identity = name.split(":", 1)[1]
                reembed.update(ix for ix, b in vs.bindings(conn).items() if b.identity == identity)
    reembed.discard("")
    if reembed:
        with ctx.catalog.write() as w:
            for ix in sorted(reembed):
                vs.log_reembed(w, ix)
        result = jobs.run_inline(ctx, "build_embeddings", {})
        done.append(
            f"re-embedded what lacked a vector in {len(reembed)} index(es): {result.get('Message', '')}"
        )
    for d in by_kind.get("unused_collection", []):
        for identity in d.items:
            if ctx.vectors.drop_collection(identity):
                done.append(f"deleted the collection of {identity}: no index uses it")
    done += verify_clones.repair_clones(ctx, by_kind, reachable)
    return done


def verify(
    ctx: Context,
    index_name: str | None = None,
    repair: bool = False,
    *,
    reachable: Callable[[SourceRow], bool] | None = None,
) -> dict[str, Any]:
    """``{clean, differences, repaired, remaining, Message}``; ``clean``: nothing differs (after the
    repair, with ``repair``). ``reachable`` (a remote caller's, ``reach.reachable``): the sources
    whose url the repair may clone or fetch from; the others' clones are left for the CLI."""
    found, rebuilding = checked(ctx, index_name)
    out: dict[str, Any] = {"differences": [d.as_dict() for d in found], "repaired": [], "remaining": []}
    remaining = found
    if repair and any(d.repairable for d in found):
        with ctx.write_lock:
            verify_clones.broken_clone(ctx, found, reachable)
            out["repaired"] = _repair(ctx, [d for d in found if d.repairable], reachable)
        remaining, rebuilding = checked(ctx, index_name)
        out["remaining"] = [d.as_dict() for d in remaining]
    elif repair:
        out["remaining"] = out["differences"]
    out["clean"] = not remaining
    if not found:
        out["Message"] = "the catalog, keyword index, vectors, clones and watermarks agree"
    elif not repair:
        kinds = ", ".join(f"{d.kind} ({d.count})" for d in found)
        out["Message"] = (
            f"{len(found)} difference(s): {kinds}; `gitkb verify --repair` fixes the repairable ones"
        )
    elif remaining:
        kinds = ", ".join(f"{d.kind} ({d.count})" for d in remaining)
        out["Message"] = f"repaired what could be; {len(remaining)} difference(s) remain: {kinds}"
    else:
        out["Message"] = f"repaired {len(found)} difference(s); the stores agree now"
    out["rebuilding"] = rebuilding
    out["Message"] += verify_rechunk.note(rebuilding)
    return out
