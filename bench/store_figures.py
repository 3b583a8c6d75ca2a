"""The README's store figures, measured on the stores themselves (issue 21: a README that is true).

Not a test: prints figures (run it on a quiet machine; the load average is printed too).

1. Keyword engines: the same chunk texts (awsdocs pages cut into pieces of about 1,000
   characters, ``--chunks`` of them) in tantivy through gitkb's ``KeywordIndex`` and in SQLite
   FTS5 (porter tokenizer, ranked by ``bm25()``); the same OR-queries (made from the awsdocs dev
   questions), top 10: p50/p95 of each (README "Dependencies": tantivy against FTS5).
2. BM25 rescoring: the same queries with k1/b other than tantivy's own (0.9/0.4), against
   tantivy's; the extra time per rescored candidate (``max(10, RESCORE_POOL)`` of them), p50 and
   the range over the queries (README "Search and ranking").
3. Chroma HNSW: ``--vectors`` random unit vectors of 384 dims in gitkb's ``VectorStore`` (a
   cosine collection, as the embedder's would be), top-10 queries restricted to the index as
   SEARCH does: p50/p95 of ``VectorStore.query`` alone (README "Cost at scale").

    .venv/bin/python bench/store_figures.py [--chunks 20000] [--vectors 106257] [--queries 100]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, queries_from_dev  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "awsdocs"
WORDS = re.compile(r"\w+", re.UNICODE)
INDEX_ID = "kidx_bench"


def pieces(docs: Path, n: int, size: int = 1000) -> list[str]:
    """The first ``n`` pieces of about ``size`` characters, cut at paragraph ends, of the pages under ``docs``."""
    out: list[str] = []
    for path in sorted(docs.rglob("*.md")):
        buf = ""
        for para in path.read_text(encoding="utf-8", errors="replace").split("\n\n"):
            buf = f"{buf}\n\n{para}" if buf else para
            if len(buf) >= size:
                out.append(buf)
                buf = ""
                if len(out) >= n:
                    return out
        if buf.strip():
            out.append(buf)
            if len(out) >= n:
                return out
    return out


def timed(fn: Callable[[str], object], queries: list[str]) -> list[float]:
    for q in queries[:5]:  # warm-up
        fn(q)
    lat = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        lat.append((time.perf_counter() - t) * 1000)
    return lat


def keyword_engines(texts: list[str], queries: list[str], work: Path) -> None:
    from gitkb.stores.keyword_schema import RESCORE_POOL, KeywordDoc  # heavy: tantivy
    from gitkb.stores.keywords import KeywordIndex  # heavy: tantivy

    kw = KeywordIndex(work / "tantivy")
    kw.apply([], [KeywordDoc(i + 1, INDEX_ID, None, "", t) for i, t in enumerate(texts)])
    kw.commit()
    db = sqlite3.connect(work / "fts5.sqlite")
    db.execute("CREATE VIRTUAL TABLE chunks USING fts5(text, tokenize='porter unicode61')")
    db.executemany("INSERT INTO chunks(rowid, text) VALUES (?, ?)", enumerate(texts, 1))
    db.commit()

    def tantivy_search(q: str) -> object:
        return kw.search(q, index_ids=[INDEX_ID], limit=10)

    def fts5_search(q: str) -> object:
        match = " OR ".join(f'"{w}"' for w in WORDS.findall(q))
        sql = "SELECT rowid FROM chunks WHERE chunks MATCH ? ORDER BY bm25(chunks) LIMIT 10"
        return db.execute(sql, (match,)).fetchall() if match else []

    t_lat, f_lat = timed(tantivy_search, queries), timed(fts5_search, queries)
    print(f"keyword engines, {len(texts):,} chunks, {len(queries)} OR-queries, top 10:")
    print(f"  tantivy (KeywordIndex.search): p50 {pct(t_lat, 50):.2f} ms, p95 {pct(t_lat, 95):.2f} ms")
    print(f"  SQLite FTS5 (bm25):            p50 {pct(f_lat, 50):.2f} ms, p95 {pct(f_lat, 95):.2f} ms")

    def rescored(q: str) -> object:
        return kw.search(q, index_ids=[INDEX_ID], limit=10, bm25=(0.9, 0.4))

    per: list[tuple[int, float]] = []
    for q in queries:
        pool = len(kw.search(q, index_ids=[INDEX_ID], limit=max(10, RESCORE_POOL)))  # the candidates rescored
        if pool:
            extra = min(timed(rescored, [q] * 3)) - min(timed(tantivy_search, [q] * 3))
            per.append((len(WORDS.findall(q)), max(0.0, extra) / pool))
    if per:
        costs = [c for _, c in per]
        short = [c for n, c in per if n <= 4] or costs
        long = [c for n, c in per if n > 8] or costs
        print(
            f"BM25 rescoring (k1/b 0.9/0.4), per rescored candidate: p50 {statistics.median(costs):.2f} ms,"
            f" {min(costs):.2f}-{max(costs):.2f} ms over {len(per)} queries"
            f" (queries of up to 4 words p50 {statistics.median(short):.2f} ms, over 8 words {statistics.median(long):.2f} ms)"
        )
    db.close()
    kw.close()


def unit_vectors(n: int, dims: int, seed: int = 7) -> Iterator[list[float]]:
    rnd = random.Random(seed)
    for _ in range(n):
        v = [rnd.gauss(0.0, 1.0) for _ in range(dims)]
        norm = sum(x * x for x in v) ** 0.5
        yield [x / norm for x in v]


def hnsw(n: int, n_queries: int, work: Path, dims: int = 384) -> None:
    from gitkb.core.embedders.base import make_fingerprint
    from gitkb.stores.vectors import VectorStore  # heavy: chromadb

    fp = make_fingerprint("bench/random", dims)
    store = VectorStore.open_persistent(work / "vectors")
    t0 = time.perf_counter()
    batch: list[list[float]] = []
    done = 0
    for v in unit_vectors(n, dims):
        batch.append(v)
        if len(batch) == 4096:
            ids = [f"c{done + i}" for i in range(len(batch))]
            store.upsert(fp, ids, batch, [{"index_id": INDEX_ID} for _ in batch])
            done += len(batch)
            batch = []
    if batch:
        store.upsert(
            fp, [f"c{done + i}" for i in range(len(batch))], batch, [{"index_id": INDEX_ID} for _ in batch]
        )
    load_s = time.perf_counter() - t0
    qs = list(unit_vectors(n_queries + 5, dims, seed=11))
    it = iter(qs)
    lat = timed(lambda _q: store.query("bench/random", next(it), 10, index_ids=[INDEX_ID]), [""] * n_queries)
    print(
        f"Chroma HNSW (cosine, {dims} dims), {store.count('bench/random'):,} vectors (loaded in {load_s:.0f} s),"
        f" {n_queries} top-10 queries filtered by index: p50 {pct(lat, 50):.2f} ms, p95 {pct(lat, 95):.2f} ms"
    )
    store.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=Path, default=DATA / "docs")
    ap.add_argument("--questions", type=Path, default=DATA / "questions.dev.jsonl")
    ap.add_argument("--chunks", type=int, default=20000)
    ap.add_argument("--vectors", type=int, default=106257)
    ap.add_argument("--queries", type=int, default=100)
    args = ap.parse_args(argv)
    print(f"load average at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    queries = queries_from_dev(args.questions, args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        keyword_engines(pieces(args.docs, args.chunks), queries, Path(tmp))
        hnsw(args.vectors, args.queries, Path(tmp))
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
