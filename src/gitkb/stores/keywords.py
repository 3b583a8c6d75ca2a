"""The keyword index: tantivy BM25 over chunks (derived from the catalog, rebuildable).

Each tantivy document is one chunk: ``cid`` (the catalog's chunk row id, the
key applying is idempotent by), ``index_id`` and ``tenant`` (raw, for
filters), ``title`` (document title + heading path) and ``text``, both analysed
with English stemming and stop words. Text is not stored here: hits are
resolved against the catalog, which is the truth.
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


class KeywordIndex:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.schema = _schema()
        self._writer: Any = None
        self._lock = threading.RLock()
        # A commit running on its own thread (``start_commit``): the thread, what its caller tagged
        # it with, and the error it ended with. tantivy releases the GIL while it commits.
        self._committing: threading.Thread | None = None
        self._commit_tag: int | None = None
        self._commit_error: BaseException | None = None
        self._commit_failed = False  # until ``finish_commit`` says so
        # Why the files on disk cannot be opened (a segment file gone, say), or None. A damaged index
        # still lets the workspace open: every read or write of it raises StoreUnavailable naming
        # ``gitkb verify --repair``, which rebuilds it from the catalog (``reset`` then a re-feed).
        self.damage: str | None = None
        self._index: Any = self._open()

    def _open(self) -> Any:
        try:
            index = tantivy.Index(self.schema, path=str(self.path), reuse=True)
        except ValueError as exc:
            self.damage = str(exc)
            return None
        index.register_tokenizer(ANALYZER, _analyzer())
        self.damage = None
        return index

    def _damaged(self, exc: Exception | str) -> StoreUnavailable:
        self.damage = str(exc)
        return StoreUnavailable(
            f"the keyword index at {self.path} is damaged ({self.damage}); run `{REPAIR}` to rebuild it",
            next_steps=[f"run `{REPAIR}` (it rebuilds the keyword index from the catalog)"],
        )

    @property
    def index(self) -> Any:
        """The open tantivy index; StoreUnavailable (naming ``gitkb verify --repair``) when damaged."""
        if self._index is None:
            raise self._damaged(self.damage or "it could not be opened")
        return self._index

    def _reload(self) -> None:
        try:
            self.index.reload()
        except ValueError as exc:
            raise self._damaged(exc) from exc

    def reset(self) -> None:
        """Delete the index files and start an empty index (repair; the caller re-feeds it)."""
        with self._lock:
            self.close()
            self._index = None
            for p in self.path.iterdir():
                if p.is_dir():
                    shutil.rmtree(p)
                else:
                    p.unlink()
            self._index = self._open()
            if self._index is None:
                raise self._damaged(self.damage or "it could not be created")

    # -- writing ---------------------------------------------------------
    def _get_writer(self) -> Any:
        self._join_commit()
        if self._writer is None:
            try:
                self._writer = self.index.writer(WRITER_HEAP, 1)
            except ValueError as exc:
                raise Busy(
                    f"the keyword index at {self.path} is held by another gitkb process ({exc})",
                    next_steps=["wait for the other gitkb process to finish, or stop it"],
                ) from exc
        return self._writer

    def apply(
        self, removes: Iterable[int], adds: Sequence[KeywordDoc], drop_indexes: Iterable[str] = ()
    ) -> None:
        """Delete then (re)add; idempotent by cid. Call ``commit`` after."""
        with self._lock:
            w = self._get_writer()
            for ix in drop_indexes:
                w.delete_documents_by_term("index_id", ix)
            gone = sorted(set(removes) | {d.cid for d in adds})
            for i in range(0, len(gone), 4096):
                w.delete_documents_by_query(self._cids_query(gone[i : i + 4096]))
            for d in adds:
                doc = tantivy.Document()
                doc.add_unsigned("cid", d.cid)
                doc.add_text("index_id", d.index_id)
                doc.add_text("tenant", d.tenant or NO_TENANT)
                doc.add_text("title", d.title)
                doc.add_text("text", d.text)
                w.add_document(doc)

    def _cids_query(self, cids: list[int]) -> Any:
        # delete_documents_by_term turns a Python int into an i64 term, which never matches
        # a u64 field; a query built from the schema has the right type.
        return tantivy.Query.term_set_query(self.schema, "cid", cids)

    def commit(self) -> None:
        with self._lock:
            self._join_commit()
            if self._writer is not None:
                self._writer.commit()
                self._writer.wait_merging_threads()
                self._writer = None
            self._reload()

    def start_commit(self, tag: int) -> None:
        """``commit`` on a thread of its own, tagged ``tag``; the caller goes on (tantivy serialises
        what was applied while the caller writes the catalog). The next write, ``commit``, ``close`` or
        ``finish_commit`` waits for it first; ``finish_commit`` says it is durable and returns ``tag``."""
        with self._lock:
            self._join_commit()
            writer, self._writer = self._writer, None

            def run() -> None:
                try:
                    if writer is not None:
                        writer.commit()
                        writer.wait_merging_threads()
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
            self._reload()
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
        with self._lock:
            w = self._get_writer()
            w.delete_all_documents()
            self.commit()

    def close(self) -> None:
        with self._lock:
            # closing: a failed commit is applied again from the log (the watermark did not move)
            with contextlib.suppress(ValueError, OSError):
                self._join_commit()
            if self._writer is not None:
                self._writer.rollback()
                self._writer = None

    # -- reading ---------------------------------------------------------
    def count(self, index_ids: Sequence[str] | None = None) -> int:
        self._reload()
        searcher = self.index.searcher()
        if index_ids is None:
            return int(searcher.num_docs)
        q = self._filter_query("index_id", index_ids)
        return int(searcher.search(q, limit=1, count=True).count)

    def all_cids(self) -> dict[int, int]:
        """cid -> how many entries hold it (more than 1 is a duplicate), every index and tenant: verify."""
        self._reload()
        searcher = self.index.searcher()
        n = int(searcher.num_docs)
        out: dict[int, int] = {}
        if n == 0:
            return out
        for _score, addr in searcher.search(tantivy.Query.all_query(), limit=n, count=False).hits:
            cid = int(searcher.doc(addr)["cid"][0])
            out[cid] = out.get(cid, 0) + 1
        return out

    def _filter_query(self, field: str, values: Sequence[str]) -> Any:
        # A filter must not move scores: constant score 0.
        return tantivy.Query.const_score_query(
            tantivy.Query.term_set_query(self.schema, field, list(values)), 0.0
        )

    def cids_with_term(self, term: str, index_ids: Sequence[str]) -> set[int]:
        """Every chunk (any tenant) of these indexes whose text or title holds ``term`` (an analysed
        term, see ``analyze``): LIST_DOCUMENTS' content filter."""
        self._reload()
        searcher = self.index.searcher()
        words = tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Should, tantivy.Query.term_query(self.schema, f, term))
                for f in ("text", "title")
            ]
        )
        q = tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, words), (tantivy.Occur.Must, self._filter_query("index_id", index_ids))]
        )
        n = int(searcher.search(q, limit=1, count=True).count)
        if n == 0:
            return set()
        return {
            int(searcher.doc(addr)["cid"][0])
            for _score, addr in searcher.search(q, limit=n, count=False).hits
        }

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

        ``bm25`` = (k1, b) other than tantivy's own rescores the best ``max(limit, RESCORE_POOL)``
        hits with those parameters (``rescore``)."""
        terms = " ".join(_QUERY_WORDS.findall(query))
        if not terms:
            return []
        self._reload()
        parsed, _errors = self.index.parse_query_lenient(
            terms, default_field_names=["text", "title"], field_boosts={"title": TITLE_BOOST}
        )
        clauses = [(tantivy.Occur.Must, parsed)]
        if index_ids is not None:
            if not index_ids:
                return []
            clauses.append((tantivy.Occur.Must, self._filter_query("index_id", index_ids)))
        clauses.append((tantivy.Occur.Must, self._filter_query("tenant", [tenant or NO_TENANT])))
        q = tantivy.Query.boolean_query(clauses)
        searcher = self.index.searcher()
        k1, b = bm25 if bm25 is not None else TANTIVY_BM25
        custom = (k1, b) != TANTIVY_BM25
        result = searcher.search(q, limit=max(limit, RESCORE_POOL) if custom else limit, count=False)
        out = []
        for score, addr in result.hits:
            if custom:
                score = rescore(json.loads(q.explain(searcher, addr).to_json()), k1, b)
            doc = searcher.doc(addr)
            out.append((int(doc["cid"][0]), float(score)))
        if custom:
            out.sort(key=lambda h: -h[1])
        return out[:limit]


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
