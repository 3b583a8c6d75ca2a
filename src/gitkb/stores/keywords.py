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
import functools
import json
import re
import shutil
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy

from gitkb.core.errors import Busy, StoreUnavailable
from gitkb.core.faults import crash_point

ANALYZER = "en_kb"
# Weight of the title field (document title + heading path) against the text. Measured
# (gitkb eval): 2.0 -> SciFact train nDCG@10 0.622, awsdocs R@1 0.45; 0.3 -> 0.705, 0.60;
# 0 -> 0.700, 0.65 (R@5 0.80 against 0.95). The text usually repeats the title.
TITLE_BOOST = 0.3
WRITER_HEAP = 64 * 1024 * 1024
NO_TENANT = "\x00none"
# Query words; dotted identifiers (c5d.12xlarge, db.t2.medium, v1.11) stay whole, so the parser
# matches their pieces as a phrase. Measured: awsdocs R@1 0.60 -> 0.65, MRR@10 0.731 -> 0.758;
# SciFact nDCG@10 0.7052 -> 0.7055. Keeping hyphenated words whole cost SciFact 0.011: not done.
_QUERY_WORDS = re.compile(r"\w+(?:\.\w+)*", re.UNICODE)
# tantivy scores with BM25 k1 = 1.2, b = 0.75, fixed in the engine. Other values are applied by
# rescoring tantivy's best max(limit, RESCORE_POOL) candidates from each hit's score explanation
# (term frequency, field length, average length, idf): exact, but 0.25-1.3 ms per candidate (more
# for longer queries). Measured on SciFact/awsdocs: no k1/b beat tantivy's (README "Performance").
TANTIVY_BM25 = (1.2, 0.75)
RESCORE_POOL = 50
REPAIR = "gitkb verify --repair"


def _schema() -> tantivy.Schema:
    b = tantivy.SchemaBuilder()
    b.add_unsigned_field("cid", stored=True, indexed=True, fast=True)
    b.add_text_field("index_id", stored=False, tokenizer_name="raw", index_option="basic")
    b.add_text_field("tenant", stored=False, tokenizer_name="raw", index_option="basic")
    b.add_text_field("title", stored=False, tokenizer_name=ANALYZER)
    b.add_text_field("text", stored=False, tokenizer_name=ANALYZER)
    return b.build()


def _analyzer() -> Any:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(64))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


@functools.cache
def _term_analyzer() -> Any:
    return _analyzer()


def analyze(text: str) -> list[str]:
    """The terms the keyword index makes of ``text``: lower-cased, folded, stop words out, stemmed."""
    return list(_term_analyzer().analyze(text))


@dataclass(frozen=True)
class KeywordDoc:
    cid: int
    index_id: str
    tenant: str | None
    title: str
    text: str


_SHARD_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
LEGACY_MARK = "meta.json"  # the old layout: one tantivy index for the whole home, at the top


def shard_name_ok(name: str) -> bool:
    """Whether ``name`` can be an index's folder under the keyword directory (an index id)."""
    return _SHARD_NAME.fullmatch(name) is not None


class _Shard:
    """The tantivy index of one gitkb index, ``<keywords>/<index_id>/``: its own BM25 statistics."""

    def __init__(self, index_id: str, path: Path, schema: tantivy.Schema) -> None:
        self.index_id = index_id
        self.path = path
        self.writer: Any = None
        self.pending: set[int] = set()  # cids added since the last commit: not in the searcher yet
        self.damage: str | None = None
        self.index: Any = None
        try:
            path.mkdir(parents=True, exist_ok=True)
            self.index = tantivy.Index(schema, path=str(path), reuse=True)
            self.index.register_tokenizer(ANALYZER, _analyzer())
        except (ValueError, OSError) as exc:
            self.damage = str(exc)
            self.index = None


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
        # A commit running on its own thread (``start_commit``): the thread, what its caller tagged
        # it with, and the error it ended with. tantivy releases the GIL while it commits.
        self._committing: threading.Thread | None = None
        self._commit_tag: int | None = None
        self._commit_error: BaseException | None = None
        self._commit_failed = False  # until ``finish_commit`` says so

    # -- the folders -----------------------------------------------------
    @property
    def legacy(self) -> bool:
        """The home still has the old layout (one index for every gitkb index, filtered by index id):
        never read; the writer's catch-up rebuilds it from the catalog (``clear`` removes it)."""
        return (self.path / LEGACY_MARK).exists()

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

    def _touched(self) -> list[_Shard]:
        return [sh for _ix, sh in sorted(list(self._shards.items())) if sh.writer is not None]

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
            touched = self._touched()
            writers = [sh.writer for sh in touched]
            for sh in touched:
                sh.writer = None
                sh.pending.clear()
            self._commit_writers(writers)

    def start_commit(self, tag: int) -> None:
        """``commit`` on a thread of its own, tagged ``tag``; the caller goes on (tantivy serialises
        what was applied while the caller writes the catalog). The next write, ``commit``, ``close`` or
        ``finish_commit`` waits for it first; ``finish_commit`` says it is durable and returns ``tag``."""
        with self._lock:
            self._join_commit()
            touched = self._touched()
            writers = [sh.writer for sh in touched]
            for sh in touched:
                sh.writer = None
                sh.pending.clear()

            def run() -> None:
                try:
                    self._commit_writers(writers)
                except BaseException as exc:  # raised again by whoever waits for it
                    self._commit_error = exc

            self._commit_tag, self._commit_error, self._commit_failed = tag, None, False
            self._committing = threading.Thread(target=run, name="gitkb-keyword-commit", daemon=True)
            self._committing.start()

    def _join_commit(self) -> None:
        """Wait for a ``start_commit`` still running; its error is raised here (the tag stays for
        ``finish_commit``, which raises it too)."""
        t = self._committing
        if t is None:
            return
        t.join()
        self._committing = None
        if self._commit_error is None:
            return
        exc, self._commit_error, self._commit_failed = self._commit_error, None, True
        raise exc

    def finish_commit(self) -> int | None:
        """Wait for the last ``start_commit``; the tag it was given (its commit is durable), or None
        when there was none since the last ``finish_commit``. A commit that failed raises here (also
        when a write waiting for it raised first): what it held was lost, the caller applies it again."""
        with self._lock:
            try:
                self._join_commit()
            except BaseException:
                self._commit_tag, self._commit_failed = None, False  # raised now, once
                raise
            tag, self._commit_tag = self._commit_tag, None
            if self._commit_failed:  # a write waiting for it raised it first
                self._commit_failed = False
                raise StoreUnavailable(
                    f"a commit of the keyword index at {self.path} failed; what it held is applied again"
                )
            return tag

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
        merged: dict[int, int] = {}
        for by_ix in out.values():
            for cid, k in by_ix.items():
                merged[cid] = merged.get(cid, 0) + k
        # a cid held by two folders is a duplicate too: each folder's count says it
        for by_ix in out.values():
            for cid in by_ix:
                by_ix[cid] = merged[cid]
        return out

    def _filter_query(self, field: str, values: Sequence[str]) -> Any:
        # A filter must not move scores: constant score 0.
        return tantivy.Query.const_score_query(
            tantivy.Query.term_set_query(self.schema, field, list(values)), 0.0
        )

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
        bm25: tuple[float, float] | None = None,
    ) -> list[tuple[int, float]]:
        """(cid, bm25 score) best first. Query text is free text, never query syntax.

        Each searched index answers from its own statistics; the hits are merged by score, ties in
        index id order, then each index's own order. ``bm25`` = (k1, b) other than tantivy's own
        rescores each index's best ``max(limit, RESCORE_POOL)`` hits with those parameters (``rescore``)."""
        terms = " ".join(_QUERY_WORDS.findall(query))
        if not terms or limit <= 0:
            return []
        k1, b = bm25 if bm25 is not None else TANTIVY_BM25
        custom = (k1, b) != TANTIVY_BM25
        merged: list[tuple[float, int, int, int]] = []  # (-score, index order, position, cid)
        searchers = [(ix, self._searcher(ix)) for ix in self._read_ids(index_ids)]
        for order, (ix, searcher) in enumerate(searchers):
            if searcher is None:
                continue
            shard = self._shards.get(ix)
            if shard is None or shard.index is None:
                continue
            parsed, _errors = shard.index.parse_query_lenient(
                terms, default_field_names=["text", "title"], field_boosts={"title": TITLE_BOOST}
            )
            q = tantivy.Query.boolean_query(
                [
                    (tantivy.Occur.Must, parsed),
                    (tantivy.Occur.Must, self._filter_query("tenant", [tenant or NO_TENANT])),
                ]
            )
            result = searcher.search(q, limit=max(limit, RESCORE_POOL) if custom else limit, count=False)
            hits = []
            for score, addr in result.hits:
                if custom:
                    score = rescore(json.loads(q.explain(searcher, addr).to_json()), k1, b)
                hits.append((int(searcher.doc(addr)["cid"][0]), float(score)))
            if custom:
                hits.sort(key=lambda h: -h[1])
            merged.extend((-score, order, pos, cid) for pos, (cid, score) in enumerate(hits[:limit]))
        merged.sort()
        return [(cid, -neg) for neg, _order, _pos, cid in merged[:limit]]


def rescore(node: dict[str, Any], k1: float, b: float) -> float:
    """A hit's score recomputed with BM25 ``k1``/``b`` from tantivy's explanation of it.

    Sums and boosts are walked; each BM25 term (or phrase) node is recomputed as
    ``idf * (k1 + 1) * freq / (freq + k1 * (1 - b + b * dl / avgdl))`` from the values the
    explanation reports; any other node (a constant-score filter) keeps its value."""
    desc = str(node.get("description", ""))
    kids: list[dict[str, Any]] = node.get("details") or []
    tf = next((c for c in kids if str(c.get("description", "")).startswith("freq / (freq + k1")), None)
    if tf is not None:
        idf = next(float(c["value"]) for c in kids if str(c.get("description", "")).startswith("idf"))
        parts = {
            str(c.get("description", "")).split(",")[0]: float(c["value"]) for c in tf.get("details") or []
        }
        freq, dl, avgdl = parts["freq"], parts["dl"], parts["avgdl"] or 1.0
        return idf * (k1 + 1) * freq / (freq + k1 * (1 - b + b * dl / avgdl))
    if desc.startswith("Boost x") and len(kids) == 1:
        return float(desc[len("Boost x") :].split()[0]) * rescore(kids[0], k1, b)
    if "sum of" in desc:
        return sum(rescore(c, k1, b) for c in kids)
    if desc == "Phrase Scorer" and len(kids) == 1:
        return rescore(kids[0], k1, b)
    return float(node.get("value", 0.0))
