"""The keyword index: tantivy BM25 over chunks (derived from the catalog, rebuildable).

Each tantivy document is one chunk: ``cid`` (the catalog's chunk row id, the
key applying is idempotent by), ``index_id`` and ``tenant`` (raw, for
filters), ``title`` (document title + heading path) and ``text``, both analysed
with English stemming and stop words. Text is not stored here: hits are
resolved against the catalog, which is the truth.

Each gitkb index has a tantivy index of its own, ``<keywords>/<index id>/`` (issue 20): BM25's
document frequencies and average field length are that index's, so its ranking does not depend on
what else the home holds (SciFact keyword nDCG@10 0.7048 alone, 0.6973 when one tantivy index was
shared with a second gitkb index; 0.7048 again with one each). A search of several indexes merges
each one's hits by score. ``index_id`` stays in the schema (unused by searches) so that a folder's
entries say whose they are. The layout before (one index for the home, ``meta.json`` at the top)
is never read: ``legacy`` says it is there and the first catch-up rebuilds from the catalog.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import tantivy

from gitkb.core.errors import Busy, StoreUnavailable
from gitkb.core.faults import crash_point
from gitkb.stores.keyword_commit import BackgroundCommit
from gitkb.stores.keyword_schema import (
    LEGACY_MARK,
    NO_TENANT,
    REPAIR,
    TANTIVY_BM25,
    WRITER_HEAP,
    KeywordDoc,
    _schema,
    _Shard,
    count_across,
    free_words,
    index_hits,
    mark_rebuild,
    rebuild_pending,
    shard_name_ok,
)


class KeywordIndex:
    """Every gitkb index's own tantivy index, one folder each under ``path`` (``<home>/keywords``),
    each opened on first use: the BM25 statistics (document frequencies, average field length) of an
    index are its own, whatever else the home holds. Writes route each entry by its index id; a
    search asks each searched index's searcher and merges the hits by score."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.schema = _schema()
        self._shards: dict[str, _Shard] = {}
        self._lock = threading.RLock()  # writes; reads take none (each shard's searcher is its own)
        self._open_lock = threading.Lock()
        self._background = BackgroundCommit()  # a commit on its own thread (``start_commit``)

    # -- the folders -----------------------------------------------------
    @property
    def legacy(self) -> bool:
        """The home still has the old layout (one index for every gitkb index, filtered by index id):
        never read; the writer's catch-up rebuilds it from the catalog (``clear`` removes it)."""
        return (self.path / LEGACY_MARK).exists()

    @property
    def needs_rebuild(self) -> bool:
        """The old layout is here, or a rebuild did not finish: only a rebuild from the catalog helps."""
        return rebuild_pending(self.path)

    def mark_rebuilding(self, on: bool) -> None:
        """Say that a rebuild from the catalog is under way (``on``) or done (``mark_rebuild``)."""
        mark_rebuild(self.path, on)

    def folders(self) -> list[str]:
        """The index ids that have a folder here, sorted."""
        if not self.path.is_dir():
            return []
        return sorted(p.name for p in self.path.iterdir() if p.is_dir() and shard_name_ok(p.name))

    def _shard(self, index_id: str, *, create: bool) -> _Shard | None:
        sh = self._shards.get(index_id)
        if sh is not None:
            return sh
        if not shard_name_ok(index_id):
            raise StoreUnavailable(f"{index_id!r} cannot name a keyword index folder")
        folder = self.path / index_id
        with self._open_lock:  # a search and a write may open it at once: one of them does
            sh = self._shards.get(index_id)
            if sh is None:
                # a reader opens only what a writer made (meta.json written): it never creates files
                if not create and not (folder / "meta.json").is_file():
                    return None
                sh = self._shards[index_id] = _Shard(index_id, folder, self.schema)
            return sh

    @property
    def damage(self) -> str | None:
        """Why the files of some index cannot be opened (a segment file gone, say), or None. A damaged
        index still lets the workspace open: every read or write of it raises StoreUnavailable naming
        ``gitkb verify --repair``, which rebuilds the keyword side from the catalog."""
        for ix in self.folders():  # no write lock: status asks while a long feed holds it
            sh = self._shard(ix, create=False)
            if sh is not None and sh.damage is not None:
                return f"index {ix}: {sh.damage}"
        return None

    def _damaged(self, sh: _Shard, exc: Exception | str) -> StoreUnavailable:
        sh.damage = str(exc)
        return StoreUnavailable(
            f"the keyword index at {sh.path} is damaged ({sh.damage}); run `{REPAIR}` to rebuild it",
            next_steps=[f"run `{REPAIR}` (it rebuilds the keyword index from the catalog)"],
        )

    def _open_index(self, sh: _Shard) -> Any:
        if sh.index is None:
            raise self._damaged(sh, sh.damage or "it could not be opened")
        return sh.index

    def _searcher(self, index_id: str) -> Any:
        """The fresh searcher of ``index_id``'s index, or None when it has no folder (nothing there)."""
        sh = self._shard(index_id, create=False)
        if sh is None:
            return None
        index = self._open_index(sh)
        try:
            index.reload()
        except ValueError as exc:
            if not (sh.path / "meta.json").exists():  # dropped (or cleared) meanwhile by the writer
                self._shards.pop(index_id, None)
                return None
            raise self._damaged(sh, exc) from exc
        return index.searcher()

    def searcher(self, index_id: str) -> Any:
        """A fresh tantivy searcher of ``index_id``'s own index (its statistics), or None when it has
        none yet: for measurements (``bench/``), never for answers."""
        return self._searcher(index_id)

    def _read_ids(self, index_ids: Sequence[str] | None) -> list[str]:
        if index_ids is None:
            return self.folders()
        return sorted(set(index_ids))

    def _remove_children(self) -> None:
        for p in self.path.iterdir():
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink()

    def reset(self) -> None:
        """Delete every index's files (and the old layout's) and start empty (repair; the caller re-feeds)."""
        with self._lock:
            self.close()
            self._shards.clear()
            self._remove_children()

    # -- writing ---------------------------------------------------------
    def _get_writer(self, sh: _Shard) -> Any:
        if sh.writer is None:
            try:
                sh.writer = self._open_index(sh).writer(WRITER_HEAP, 1)
            except ValueError as exc:
                raise Busy(
                    f"the keyword index at {sh.path} is held by another gitkb process ({exc})",
                    next_steps=["wait for the other gitkb process to finish, or stop it"],
                ) from exc
        return sh.writer

    def _holders(self, cids: list[int]) -> list[_Shard]:
        """The indexes holding one of ``cids``, committed or added since: where their deletes go."""
        wanted = set(cids)
        out = []
        for ix in self.folders():
            sh = self._shard(ix, create=False)
            if sh is None:
                continue
            if sh.pending & wanted:
                out.append(sh)
                continue
            searcher = self._searcher(ix)
            if searcher is None or int(searcher.num_docs) == 0:
                continue
            for i in range(0, len(cids), 4096):
                q = self._cids_query(cids[i : i + 4096])
                if int(searcher.search(q, limit=1, count=True).count) > 0:
                    out.append(sh)
                    break
        return out

    def apply(
        self, removes: Iterable[int], adds: Sequence[KeywordDoc], drop_indexes: Iterable[str] = ()
    ) -> None:
        """Drop whole indexes (their folders go), delete ``removes`` and every added cid from whichever
        index holds them, then add each entry to its own index; idempotent by cid. Call ``commit`` after."""
        with self._lock:
            self._join_commit()
            for ix in drop_indexes:
                self._drop(ix)
            gone = sorted(set(removes) | {d.cid for d in adds})
            if gone:
                for held in self._holders(gone):
                    w = self._get_writer(held)
                    for i in range(0, len(gone), 4096):
                        w.delete_documents_by_query(self._cids_query(gone[i : i + 4096]))
                    held.pending.difference_update(gone)
            for d in adds:
                sh = self._shards.get(d.index_id) or self._shard(d.index_id, create=True)
                if sh is None:  # never: create=True opens it
                    raise StoreUnavailable(f"no keyword index folder for {d.index_id!r}")
                w = self._get_writer(sh)
                doc = tantivy.Document()
                doc.add_unsigned("cid", d.cid)
                doc.add_text("index_id", d.index_id)
                doc.add_text("tenant", d.tenant or NO_TENANT)
                doc.add_text("title", d.title)
                doc.add_text("text", d.text)
                w.add_document(doc)
                sh.pending.add(d.cid)

    def _drop(self, index_id: str) -> None:
        """An index dropped from the catalog: its folder goes (replayed after a crash: then it is gone)."""
        if not shard_name_ok(index_id):
            return
        sh = self._shards.pop(index_id, None)
        if sh is not None and sh.writer is not None:
            with contextlib.suppress(ValueError, OSError):
                sh.writer.rollback()
            sh.writer = None
        folder = self.path / index_id
        if folder.is_dir():
            shutil.rmtree(folder)

    def drop_folder(self, index_id: str) -> None:
        """Remove the folder of an index the catalog no longer has (verify's repair)."""
        with self._lock:
            self._join_commit()
            self._drop(index_id)

    def _cids_query(self, cids: list[int]) -> Any:
        # delete_documents_by_term turns a Python int into an i64 term, which never matches
        # a u64 field; a query built from the schema has the right type.
        return tantivy.Query.term_set_query(self.schema, "cid", cids)

    def _take_writers(self) -> list[Any]:
        """The writers of every index written since the last commit, in index id order, taken from
        their indexes (whose next write opens a new one) for a commit."""
        touched = [sh for _ix, sh in sorted(list(self._shards.items())) if sh.writer is not None]
        writers = [sh.writer for sh in touched]
        for sh in touched:
            sh.writer = None
            sh.pending.clear()
        return writers

    @staticmethod
    def _commit_writers(writers: list[Any]) -> None:
        for i, writer in enumerate(writers):
            if i:
                crash_point("keywords.between_indexes")  # one index committed, the next not yet
            writer.commit()
            writer.wait_merging_threads()

    def commit(self) -> None:
        """Commit every index written since the last commit, one after the other (a crash between two
        leaves the caller's watermark where it was: the batch is applied again, idempotent by cid)."""
        with self._lock:
            self._join_commit()
            self._commit_writers(self._take_writers())

    def start_commit(self, tag: int) -> None:
        """``commit`` on a thread of its own, tagged ``tag``; the caller goes on (tantivy serialises
        what was applied while the caller writes the catalog). The next write, ``commit``, ``close`` or
        ``finish_commit`` waits for it first; ``finish_commit`` says it is durable and returns ``tag``."""
        with self._lock:
            self._join_commit()
            writers = self._take_writers()
            self._background.start(tag, lambda: self._commit_writers(writers))

    def _join_commit(self) -> None:
        """Wait for a ``start_commit`` still running; its error is raised here."""
        self._background.join()

    def finish_commit(self) -> int | None:
        """Wait for the last ``start_commit``; the tag it was given (its commit is durable), or None
        when there was none since the last ``finish_commit`` (``BackgroundCommit.finish``)."""
        with self._lock:
            return self._background.finish(self.path)

    def clear(self) -> None:
        """Every index's entries gone, and their folders (and the old layout's files): a rebuild follows."""
        with self._lock:
            self.reset()

    def close(self) -> None:
        with self._lock:
            # closing: a failed commit is applied again from the log (the watermark did not move)
            with contextlib.suppress(ValueError, OSError):
                self._join_commit()
            for sh in list(self._shards.values()):
                if sh.writer is not None:
                    with contextlib.suppress(ValueError, OSError):
                        sh.writer.rollback()
                    sh.writer = None
                sh.pending.clear()

    # -- reading ---------------------------------------------------------
    def count(self, index_ids: Sequence[str] | None = None) -> int:
        total = 0
        for ix in self._read_ids(index_ids):
            searcher = self._searcher(ix)
            if searcher is not None:
                total += int(searcher.num_docs)
        return total

    def all_cids(self) -> dict[int, int]:
        """cid -> how many entries hold it (more than 1 is a duplicate), every index and tenant: verify."""
        return {cid: n for by_ix in self.cids_by_index().values() for cid, n in by_ix.items()}

    def cids_by_index(self) -> dict[str, dict[int, int]]:
        """index id (its folder) -> cid -> how many entries of that folder hold it: verify."""
        out: dict[str, dict[int, int]] = {}
        for ix in self.folders():
            searcher = self._searcher(ix)
            if searcher is None:
                continue
            got = out[ix] = {}
            n = int(searcher.num_docs)
            if n == 0:
                continue
            for _score, addr in searcher.search(tantivy.Query.all_query(), limit=n, count=False).hits:
                cid = int(searcher.doc(addr)["cid"][0])
                got[cid] = got.get(cid, 0) + 1
        return count_across(out)

    def cids_with_term(self, term: str, index_ids: Sequence[str]) -> set[int]:
        """Every chunk (any tenant) of these indexes whose text or title holds ``term`` (an analysed
        term, see ``analyze``): LIST_DOCUMENTS' content filter."""
        q = tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Should, tantivy.Query.term_query(self.schema, f, term))
                for f in ("text", "title")
            ]
        )
        out: set[int] = set()
        for ix in self._read_ids(index_ids):
            searcher = self._searcher(ix)
            if searcher is None:
                continue
            n = int(searcher.search(q, limit=1, count=True).count)
            if n:
                hits = searcher.search(q, limit=n, count=False).hits
                out.update(int(searcher.doc(addr)["cid"][0]) for _score, addr in hits)
        return out

    def search(
        self,
        query: str,
        *,
        index_ids: Sequence[str] | None,
        limit: int,
        tenant: str | None = None,
        bm25: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
    ) -> list[tuple[int, float]]:
        """(cid, bm25 score) best first. Query text is free text, never query syntax.

        Each searched index answers from its own statistics; the hits are merged by score, ties in
        index id order, then each index's own order. ``bm25`` = (k1, b) other than tantivy's own
        rescores each index's best ``max(limit, RESCORE_POOL)`` hits with those parameters (``rescore``);
        a mapping gives each index (by id) its own, tantivy's for one it leaves out."""
        terms = " ".join(free_words(query))
        if not terms or limit <= 0:
            return []
        merged: list[tuple[float, int, int, int]] = []  # (-score, index order, position, cid)
        searchers = [(ix, self._searcher(ix)) for ix in self._read_ids(index_ids)]
        for order, (ix, searcher) in enumerate(searchers):
            if searcher is None:
                continue
            shard = self._shards.get(ix)
            if shard is None or shard.index is None:
                continue
            params = bm25.get(ix, TANTIVY_BM25) if isinstance(bm25, Mapping) else bm25 or TANTIVY_BM25
            hits = index_hits(
                shard.index, searcher, self.schema, terms, tenant=tenant, limit=limit, bm25=params
            )
            merged.extend((-score, order, pos, cid) for pos, (cid, score) in enumerate(hits))
        merged.sort()
        return [(cid, -neg) for neg, _order, _pos, cid in merged[:limit]]
