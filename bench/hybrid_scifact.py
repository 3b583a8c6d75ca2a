"""Hybrid search on BEIR SciFact with the real model: throughput, latency, RSS, nDCG@10.

Not a test: prints figures. Usage (takes minutes: the corpus is embedded on CPU):

    .venv/bin/python bench/hybrid_scifact.py [--data ../shared/data/scifact] [--home /tmp/gitkb-scifact]
        [--reuse] [--queries N] [--limit-docs N] [--tput-chunks 200]

1. Throughput, pipeline against raw model, on the same ``--tput-chunks`` chunks
   (the first ones the default chunker cuts from the corpus) in the same process and with
   the same ONNX session: raw = fastembed ``TextEmbedding.embed`` at the
   configured batch size; pipeline = gitkb's vector catch-up (catalog read,
   content-hash lookup, embedding, Chroma upserts, watermark) for a fresh
   index holding those texts.
2. Ingest: every abstract (title + text) as one markdown file ``<doc id>.md``,
   default chunking, keyword-searchable at once; then the vectors catch up.
3. Search over the 809 train claims: p50/p95 latency per mode, and nDCG@10 /
   Recall@100 per mode (documents ranked by their best chunk) with ranx.
Peak RSS covers the whole process. ``--reuse`` skips 1-2 when ``--home``
already holds the embedded corpus.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gitkb import Workspace

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
INDEX = "scifact"


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def ok(r: dict[str, Any]) -> dict[str, Any]:
    if not r.get("Success"):
        sys.exit(f"failed: {r}")
    return r


def load_corpus(data: Path, limit: int | None) -> list[dict[str, str]]:
    docs = []
    with open(data / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            docs.append({"id": str(d["_id"]), "title": d.get("title") or "", "text": d.get("text") or ""})
            if limit and len(docs) >= limit:
                break
    return docs


def first_chunks(docs: list[dict[str, str]], n: int) -> list[str]:
    """The first ``n`` chunks the default chunker cuts from the corpus files (as ingest cuts them)."""
    from gitkb.core.chunking import chunk_text
    from gitkb.core.models import ChunkConfig

    out: list[str] = []
    for d in docs:
        out += [c.text for c in chunk_text(f"# {d['title']}\n\n{d['text']}\n", ChunkConfig(), markdown=True)]
        if len(out) >= n:
            break
    return list(dict.fromkeys(out))[:n]


def throughput(ws: Workspace, texts: list[str], rounds: int) -> dict[str, float]:
    """Raw fastembed vs the gitkb pipeline on the same texts (same embedder, same session), alternating."""
    from gitkb.services.derived.embeddings import catch_up_all
    from gitkb.services.derived.identity import active_identity, embedder_for
    from gitkb.services.indexing.ingest_text import add_texts
    from gitkb.stores.catalog import vector_state as vs

    ctx = ws.ctx
    identity = active_identity(ctx, save=True)
    emb: Any = embedder_for(ctx, identity)
    model, bs = emb._model, emb.batch_size
    list(model.embed(texts[:16], batch_size=bs))  # warm-up
    ok(ws.document_index("CREATE_INDEX", index_name="tput", chunk_strategy="one_chunk_per_doc"))
    add_texts(ctx, "tput", [{"text": t, "filepath": f"t{i}.txt"} for i, t in enumerate(texts)])
    row = ctx.catalog.conn.execute("SELECT id FROM indexes WHERE name = 'tput'").fetchone()
    raw_s, pipe_s = [], []
    for r in range(rounds):
        t0 = time.perf_counter()
        list(model.embed(texts, batch_size=bs))
        raw_s.append(time.perf_counter() - t0)
        if r:  # the same chunks again: drop their vectors, ask for a re-embed (no reuse left to find)
            ctx.vectors.delete_where(identity, {"index_id": row[0]})
            with ctx.catalog.write() as w:
                vs.bind(w, row[0], identity, vs.log_reembed(w, row[0]))
        t0 = time.perf_counter()
        stats = catch_up_all(ctx)
        pipe_s.append(time.perf_counter() - t0)
        assert stats.embedded == len(texts), stats
        print(f"  round {r + 1}: raw {raw_s[-1]:.1f} s, pipeline {pipe_s[-1]:.1f} s", flush=True)
    n = len(texts)
    return {
        "chunks": n,
        "raw_chunks_per_s": n / min(raw_s),
        "pipeline_chunks_per_s": n / min(pipe_s),
        "pipeline_vs_raw": min(raw_s) / min(pipe_s),
        "median_ratio": statistics.median(a / b for a, b in zip(raw_s, pipe_s, strict=True)),
    }


def ingest(ws: Workspace, docs: list[dict[str, str]], work: Path) -> dict[str, float]:
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for d in docs:
        (corpus / f"{d['id']}.md").write_text(f"# {d['title']}\n\n{d['text']}\n", encoding="utf-8")
    ok(ws.document_index("CREATE_INDEX", index_name=INDEX))
    t0 = time.perf_counter()
    r = ok(ws.document_index("ADD_DOCUMENTS", index_name=INDEX, filepath=str(corpus), base_path=str(corpus)))
    t_kw = time.perf_counter() - t0
    print(
        f"ingest (keyword-searchable): {len(docs)} docs, {r['chunks_written']} chunks in {t_kw:.1f} s; "
        f"warnings: {r.get('Warnings')}",
        flush=True,
    )
    from gitkb.services.derived.embeddings import catch_up_all

    last = [0.0]

    def progress(done: int, total: int, *_: Any) -> None:
        if time.perf_counter() - last[0] > 30:
            last[0] = time.perf_counter()
            print(f"  embedding {done}/{total} ({time.perf_counter() - t1:.0f} s)", flush=True)

    t1 = time.perf_counter()
    stats = catch_up_all(ws.ctx, progress=progress)
    t_emb = time.perf_counter() - t1
    print(
        f"vectors: {stats.embedded} embedded, {stats.reused} reused, {stats.clipped} clipped at the model window, "
        f"{t_emb:.0f} s ({stats.embedded / max(t_emb, 1e-9):.1f} chunks/s)",
        flush=True,
    )
    return {
        "chunks": r["chunks_written"],
        "keyword_ingest_s": t_kw,
        "embed_s": t_emb,
        "embedded": stats.embedded,
    }


def evaluate(ws: Workspace, data: Path, n_queries: int | None) -> None:
    from ranx import Qrels, Run
    from ranx import evaluate as rx_evaluate

    queries = [json.loads(line) for line in (data / "queries.train.jsonl").read_text("utf-8").splitlines()]
    qrels: dict[str, dict[str, int]] = {}
    for line in (data / "qrels" / "train.tsv").read_text("utf-8").splitlines()[1:]:
        q, d, s = line.split("\t")
        qrels.setdefault(q, {})[d] = int(s)
    queries = [q for q in queries if str(q["_id"]) in qrels][: n_queries or None]
    for q in queries[:5]:  # warm-up (query cache is per (identity, query): these get re-embedded below)
        ws.document_index("SEARCH", query=q["text"] + " warmup", index_name=INDEX, top_n=10)
    print(
        f"\n{len(queries)} train queries; documents ranked by their best chunk (top 100 chunks); "
        "latency of top_n=10 searches"
    )
    print(f"{'mode':<9} {'nDCG@10':>8} {'R@100':>7} {'p50 ms':>7} {'p95 ms':>7}")
    for mode in ("keyword", "semantic", "hybrid"):
        run: dict[str, dict[str, float]] = {}
        lat = []
        for q in queries:
            t0 = time.perf_counter()
            ok(ws.document_index("SEARCH", query=q["text"], index_name=INDEX, mode=mode, top_n=10))
            lat.append((time.perf_counter() - t0) * 1000)
            r = ok(ws.document_index("SEARCH", query=q["text"], index_name=INDEX, mode=mode, top_n=100))
            ranked: dict[str, float] = {}
            for hit in r["Results"]:
                doc = Path(hit["filepath"]).stem
                if doc not in ranked:
                    ranked[doc] = 1.0 / (len(ranked) + 1)
            run[str(q["_id"])] = ranked or {"__none__": 0.0}
        scores = rx_evaluate(Qrels({k: qrels[k] for k in run}), Run(run), ["ndcg@10", "recall@100"])
        lat.sort()
        p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
        print(
            f"{mode:<9} {scores['ndcg@10']:>8.4f} {scores['recall@100']:>7.4f} {statistics.median(lat):>7.1f} {p95:>7.1f}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--home", type=Path, default=None, help="workspace (default: a temporary folder)")
    ap.add_argument("--reuse", action="store_true", help="--home already holds the embedded corpus")
    ap.add_argument("--queries", type=int, default=None)
    ap.add_argument("--limit-docs", type=int, default=None)
    ap.add_argument("--tput-chunks", type=int, default=200)
    ap.add_argument("--tput-rounds", type=int, default=3)
    ap.add_argument("--only-throughput", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gitkb-scifact-")
    home = args.home or Path(tmp) / "ws"
    if args.only_throughput:
        home = Path(tmp) / "ws"
    ws = Workspace(home)  # the default identity: fastembed all-MiniLM-L6-v2 int8
    ws.ctx.embedding_worker.close()  # this script catches vectors up itself, in the foreground
    t_start = time.perf_counter()
    try:
        if not args.reuse:
            docs = load_corpus(args.data, args.limit_docs)
            texts = first_chunks(docs, args.tput_chunks)
            tp = throughput(ws, texts, args.tput_rounds)
            print(
                f"throughput on the same {tp['chunks']} chunks (best of {args.tput_rounds}): raw "
                f"{tp['raw_chunks_per_s']:.1f} chunks/s, pipeline {tp['pipeline_chunks_per_s']:.1f} chunks/s = "
                f"{100 * tp['pipeline_vs_raw']:.0f}% of raw (median per-round ratio {100 * tp['median_ratio']:.0f}%)",
                flush=True,
            )
            if args.only_throughput:
                return
            ingest(ws, docs, Path(tmp))
            print(f"peak RSS after ingest: {rss_mib():.0f} MiB", flush=True)
        evaluate(ws, args.data, args.queries)
    finally:
        ws.close()
    print(f"\npeak RSS {rss_mib():.0f} MiB; total {time.perf_counter() - t_start:.0f} s; workspace {home}")


if __name__ == "__main__":
    main()
