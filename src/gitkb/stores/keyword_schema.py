"""What the keyword index is made of: its schema and analyzer, the document of one chunk, the
folder of one gitkb index (``<keywords>/<index id>/``, its own BM25 statistics), and BM25 rescoring
from tantivy's score explanations, the search of one index (``index_hits``), and the marks that
say the directory must be rebuilt from the catalog (the old layout, a rebuild under way).
``stores/keywords.py`` writes them and merges the searches of several indexes.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy

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
# Words tantivy's query parser reads as operators in upper case ("a AND b", "NOT a", "f: IN [...]",
# "[a TO b]"); a query is free text, so they are searched as the words they are (lower-cased: the
# analyzer lower-cases every term anyway).
_OPERATORS = frozenset({"AND", "OR", "NOT", "IN", "TO"})
RESCORE_POOL = 50
REPAIR = "gitkb verify --repair"


def free_words(query: str) -> list[str]:
    """The words of ``query`` as the keyword index searches them: never query syntax (``_OPERATORS``)."""
    return [w.lower() if w in _OPERATORS else w for w in _QUERY_WORDS.findall(query)]


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
# A rebuild from the catalog is under way (written after the clear, removed once the watermark is
# set): a rebuild killed before its commit is started again, never caught up from the old watermark.
REBUILD_MARK = "rebuilding"


def count_across(by_index: dict[str, dict[int, int]]) -> dict[str, dict[int, int]]:
    """Each folder's cid -> entries, counted across every folder (a cid held by two folders is a
    duplicate too: each folder's count says it)."""
    merged: dict[int, int] = {}
    for by_ix in by_index.values():
        for cid, k in by_ix.items():
            merged[cid] = merged.get(cid, 0) + k
    return {ix: {cid: merged[cid] for cid in by_ix} for ix, by_ix in by_index.items()}


def rebuild_pending(path: Path) -> bool:
    """The keyword directory ``path`` holds the old layout, or a rebuild that did not finish."""
    return (path / LEGACY_MARK).exists() or (path / REBUILD_MARK).exists()


def mark_rebuild(path: Path, on: bool) -> None:
    """Write (``on``) or remove the mark of a rebuild from the catalog under way in ``path``."""
    mark = path / REBUILD_MARK
    if on:
        path.mkdir(parents=True, exist_ok=True)
        mark.write_text("a rebuild of the keyword index from the catalog is under way\n")
    else:
        mark.unlink(missing_ok=True)


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


def filter_query(schema: tantivy.Schema, field: str, values: list[str]) -> Any:
    """A filter on a raw field that does not move scores: constant score 0."""
    return tantivy.Query.const_score_query(tantivy.Query.term_set_query(schema, field, values), 0.0)


def index_hits(
    index: Any,
    searcher: Any,
    schema: tantivy.Schema,
    terms: str,
    *,
    tenant: str | None,
    limit: int,
    bm25: tuple[float, float],
) -> list[tuple[int, float]]:
    """(cid, BM25 score) of one index's best ``limit`` hits for ``terms`` (free text, never query
    syntax) of ``tenant``, best first; with (k1, b) other than tantivy's own, its best
    ``max(limit, RESCORE_POOL)`` hits rescored with them (``rescore``)."""
    k1, b = bm25
    custom = bm25 != TANTIVY_BM25
    parsed, _errors = index.parse_query_lenient(
        terms, default_field_names=["text", "title"], field_boosts={"title": TITLE_BOOST}
    )
    q = tantivy.Query.boolean_query(
        [
            (tantivy.Occur.Must, parsed),
            (tantivy.Occur.Must, filter_query(schema, "tenant", [tenant or NO_TENANT])),
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
    return hits[:limit]
