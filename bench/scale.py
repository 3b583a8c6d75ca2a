"""What gitkb costs at scale: ingest throughput, search and ASK latency, peak RSS (issue 5).

For each corpus (../shared/data/awsdocs pages, ../shared/data/scifact abstracts):

* keyword-ready ingest: ADD_DOCUMENTS (awsdocs) / ADD_TEXT in bulk (scifact, one
  ``corpus/<id>.txt`` per abstract, like ``gitkb eval beir``) into a fresh
  keyword-only index, default chunking; seconds, documents/s, chunks/s;
* vectors-ready: the real default model embeds a fresh sample (the first
  ``--embed-sample`` chunks' documents) in a fresh workspace: chunks/s, and the
  corpus estimate ``chunks / rate``; the full corpus index in ``HOME/<corpus>`` is
  embedded once and kept (or its vectors copied from ``--vectors-from`` homes);
* search p50/p95 per mode (top 10, one query at a time after 5 warm-ups), ASK p50
  (hybrid, extractive).

Then query latency at growing sizes (default 1k, 10k, 100k chunks) in
``HOME/scale``: the corpora are repeated with perturbed ids (``c<n>/`` path
prefixes), so every repeated chunk has the same text, title and headings and its
vector is reused by content hash (copied from the corpus workspaces: nothing is
embedded twice), and each size is measured with the index holding only its own
vectors (``HOME/scale`` is rebuilt from empty on every run; it costs a keyword ingest and
vector copies, no embedding). Peak RSS is this process's high-water mark after each step.

    .venv/bin/python bench/scale.py --home /tmp/gitkb-scale            # first run embeds both corpora (slow)
    .venv/bin/python bench/scale.py --home /tmp/gitkb-scale --sizes 1000,10000,100000 --json

Timings are wall-clock on whatever else the machine runs: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
MODES = ("keyword", "semantic", "hybrid")
CORPORA = ("awsdocs", "scifact")


def rss_mib() -> int:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))], 2) if s else 0.0


def ok(r: dict[str, Any]) -> dict[str, Any]:
    if not r.get("Success", True):
        sys.exit(f"failed: {r.get('Error', r)}")
    return r


def load() -> float:
    """The 1-minute load average, printed beside every figure (wall-clock figures mean little above ~1)."""
    return round(os.getloadavg()[0], 1)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- corpora ------------------------------------------------------------------------------------


def scifact_items(root: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """SciFact abstracts as ADD_TEXT items, the way ``gitkb eval beir`` stores them."""
    from gitkb.services.evaluation.datasets import doc_path, load_beir

    data = load_beir(root, "train")
    docs = data.corpus[:limit] if limit else data.corpus
    return [{"text": d.body(), "filepath": doc_path(d.id), "metadata": {"title": d.title}} for d in docs]


def queries(name: str, root: Path, n: int, seed: int = 7) -> list[str]:
    """Real questions first (awsdocs dev questions, SciFact train claims), then word windows cut from them."""
    if name == "awsdocs":
        qs = [
            json.loads(x)["question"]
            for f in sorted(root.glob("questions*.jsonl"))
            for x in f.read_text().splitlines()
            if x.strip()
        ]
    else:
        qs = [
            json.loads(x)["text"]
            for x in (root / "queries.train.jsonl").read_text().splitlines()
            if x.strip()
        ]
    rnd = random.Random(seed)
    out = qs[:n]
    while len(out) < n:
        words = rnd.choice(qs).split()
        k = rnd.randint(2, max(2, len(words)))
        start = rnd.randint(0, len(words) - k)
        out.append(" ".join(words[start : start + k]))
    return out


def ingest(
    ws: Any, name: str, root: Path, index: str, *, prefix: str = "", limit: int | None = None
) -> dict[str, Any]:
    """Add one corpus (or its first ``limit`` documents) to ``index``; keyword-ready when it returns."""
    from gitkb.services.indexing.ingest_text import add_texts

    t0 = time.perf_counter()
    if name == "awsdocs":
        docs = root / "docs"
        if limit or prefix:
            raise ValueError("awsdocs subsets go through copy_tree")
        r = ok(ws.document_index("ADD_DOCUMENTS", index_name=index, filepath=str(docs), base_path=str(docs)))
        written = r["counts"]["added"] + r["counts"]["modified"]
    else:
        items = scifact_items(root, limit)
        for it in items:
            it["filepath"] = prefix + it["filepath"]
        r = add_texts(ws.ctx, index, items)
        written = r["counts"]["added"] + r["counts"]["modified"]
    return {"seconds": time.perf_counter() - t0, "documents": written}


def chunk_count(ws: Any, index: str) -> int:
    from gitkb.services.indexing.indexes import get_index

    row = get_index(ws.ctx, index)
    return int(
        ws.ctx.catalog.conn.execute("SELECT COUNT(*) FROM chunks WHERE index_id = ?", (row.id,)).fetchone()[0]
    )


# -- vectors: reuse by content hash across workspaces -------------------------------------------


def copy_vectors(dst: Any, sources: list[Any]) -> tuple[int, int]:
    """Give ``dst``'s chunks that lack a vector the vector another workspace stores for the same model
    input (the content-hash key the vector catch-up reuses by). Returns (copied, missing)."""
    from gitkb.core.embedders import fingerprint
    from gitkb.services.derived.embedding_inputs import input_key, model_inputs
    from gitkb.services.derived.identity import active_identity, embedder_for
    from gitkb.services.derived.vectors_catchup import _upsert
    from gitkb.stores.catalog import vector_state as vs

    ctx = dst.ctx
    identity = active_identity(ctx, save=True)
    emb = embedder_for(ctx, identity)
    fp = fingerprint(emb)
    cids = [int(r[0]) for r in ctx.catalog.conn.execute("SELECT rowid FROM chunks ORDER BY rowid")]
    copied = missing = 0
    for start in range(0, len(cids), 2048):
        srcs = vs.vector_sources(ctx.catalog.conn, cids[start : start + 2048])
        have = set(ctx.vectors.get_vectors(identity, [str(s.cid) for s in srcs]))
        todo = [s for s in srcs if str(s.cid) not in have]
        if not todo:
            continue
        inputs = model_inputs(ctx, emb, todo)
        keys = {s.cid: input_key(s, inputs[s.cid]) for s in todo}
        found: dict[str, list[float]] = {}
        for src in sources:
            want = [k for k in dict.fromkeys(keys.values()) if k not in found]
            if want:
                found.update(src.ctx.vectors.find_by_content_hash(identity, want))
        hit = [s for s in todo if keys[s.cid] in found]
        if hit:
            _upsert(ctx, identity, fp, hit, [found[keys[s.cid]] for s in hit], keys)
        copied += len(hit)
        missing += len(todo) - len(hit)
    return copied, missing


def build_vectors(ws: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    r = ok(ws.build_embeddings())
    return {
        "seconds": time.perf_counter() - t0,
        "embedded": r["chunks_embedded"],
        "reused": r["chunks_reused"],
    }


# -- measurements -------------------------------------------------------------------------------


def latency(ws: Any, index: str, qs: list[str], *, ask: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in MODES:
        for q in qs[:5]:
            ok(ws.document_index("SEARCH", query=q + " warm", index_name=index, mode=mode))
        # Every timed query is embedded anew (as a new user question would be): no query-vector
        # cache left over from the previous mode or size.
        ws.ctx.caches.query_vectors.clear()
        took, cpu = [], []
        for q in qs:
            t0, c0 = time.perf_counter(), time.process_time()
            ok(ws.document_index("SEARCH", query=q, index_name=index, mode=mode))
            took.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)  # every thread: onnxruntime's, the search thread
        out[mode] = {
            "p50_ms": pct(took, 50),
            "p95_ms": pct(took, 95),
            "cpu_p50_ms": pct(cpu, 50),
            "load": load(),
        }
    if ask:
        # Cold caches at the start (query vectors, ASK's sentence vectors); a sentence two questions
        # share is embedded once, as in any session. Then the same questions again (all cached).
        ws.ctx.caches.query_vectors.clear()
        getattr(ws.ctx.caches, "text_vectors", {}).clear()  # absent before issue 20's ASK cache
        for key in ("ask", "ask_repeat"):
            took = []
            for q in qs[:ask]:
                t0 = time.perf_counter()
                ok(ws.document_index("ASK", query=q, index_name=index))
                took.append((time.perf_counter() - t0) * 1000)
            out[f"{key}_p50_ms"] = pct(took, 50)
        out["ask_load"] = load()
    return out


# (step, module or "" for a store method of the Context, attribute[, skipped when the module has this])
STAGES: tuple[tuple[str, ...], ...] = (
    ("plan", "gitkb.services.retrieval.search", "plan_modes"),
    ("embed", "gitkb.services.retrieval.semantic", "embed_query"),
    ("ann", "", "vectors.query"),
    ("semantic_resolve", "gitkb.services.retrieval.semantic", "live_chunks"),
    ("semantic_resolve", "gitkb.services.retrieval.semantic", "chunks_by_cids", "live_chunks"),  # older
    ("keyword", "", "keywords.search"),
    ("keyword_resolve", "gitkb.services.retrieval.search", "live_chunks"),
    ("keyword_resolve", "gitkb.services.retrieval.search", "chunks_by_cids", "live_chunks"),  # older
    ("fusion", "gitkb.services.retrieval.search", "rrf"),
    ("fusion", "gitkb.services.retrieval.fusion", "document_fusion"),
    ("full_rows", "gitkb.services.retrieval.search", "full_rows"),
    ("citations", "gitkb.services.retrieval.search", "citation"),
    ("fused_results", "gitkb.services.retrieval.search", "fused_results"),
)


def stages(ws: Any, index: str, qs: list[str], mode: str = "hybrid") -> dict[str, Any]:
    """Where the time of one search goes: the real SEARCH call with its steps wrapped in timers
    (wall and CPU of the thread that ran each step, summed per query; p50 over the queries).
    ``envelope`` is the call minus ``fused_results`` (policy, plan, response); the keyword side runs
    on a search thread beside the semantic side, so the steps add up to more than ``total``."""
    import importlib

    ctx = ws.ctx
    per: dict[str, list[tuple[float, float]]] = {}
    current: dict[str, list[float]] = {}

    def timed(name: str, fn: Any) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                acc = current.setdefault(name, [0.0, 0.0])
                acc[0] += (time.perf_counter() - t0) * 1000
                acc[1] += (time.thread_time() - c0) * 1000

        return run

    undo: list[tuple[Any, str, Any]] = []
    for name, module, attr, *newer in STAGES:
        if not module:
            owner, attr = (
                {"vectors": ctx.vectors, "keywords": ctx.keywords}[attr.split(".")[0]],
                attr.split(".")[1],
            )
        else:
            owner = importlib.import_module(module)
        if not hasattr(owner, attr) or any(hasattr(owner, n) for n in newer):
            continue  # a step another version of gitkb does not have
        undo.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, timed(name, getattr(owner, attr)))
    try:
        for q in qs[:5]:
            ok(ws.document_index("SEARCH", query=q + " warm", index_name=index, mode=mode))
        current.clear()
        for q in qs:
            ctx.caches.query_vectors.clear()  # embedded each time
            t0, c0 = time.perf_counter(), time.process_time()
            ok(ws.document_index("SEARCH", query=q, index_name=index, mode=mode))
            total = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
            fr = current.get("fused_results", [0.0, 0.0])
            current["envelope"] = [total[0] - fr[0], 0.0]
            current["total"] = [total[0], total[1]]
            for name, (w, c) in current.items():
                per.setdefault(name, []).append((w, c))
            current.clear()
    finally:
        for owner, attr, fn in reversed(undo):
            if isinstance(owner, type(sys)):
                setattr(owner, attr, fn)
            else:
                delattr(owner, attr)  # the bound method shows through again
    names = [st[0] for st in STAGES] + ["envelope", "total"]
    return {
        n: {
            "wall_p50_ms": pct([w for w, _ in per[n]], 50),
            "wall_p95_ms": pct([w for w, _ in per[n]], 95),
            "cpu_p50_ms": pct([c for _, c in per[n]], 50),
        }
        for n in dict.fromkeys(names)
        if n in per
    } | {"mode": mode, "queries": len(qs), "load": load()}


def embed_threads(ws: Any, index: str, qs: list[str]) -> dict[str, Any]:
    """The query embedding alone, query by query in turn: the embedder's query path (``embed_query``:
    one onnxruntime thread, on the caller's) against sessions of the same model file with two
    intra-op threads, spinning between operations (onnxruntime's default, fastembed's way before
    issue 20) and not. Wall and CPU of the whole process, p50 ms. Tells on a quiet machine whether a
    second thread would shorten a query more than it takes from the keyword side running beside it."""
    import numpy as np
    import onnxruntime as ort

    from gitkb.services.derived.identity import effective_identity, embedder_for
    from gitkb.services.derived.index_lookup import get_index

    emb: Any = embedder_for(ws.ctx, effective_identity(ws.ctx, get_index(ws.ctx, index)))
    model_dir = getattr(emb, "model_dir", None)
    if model_dir is None:
        return {}
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(max_length=256)
    tok.no_padding()

    def session(spin: bool) -> Any:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = opts.inter_op_num_threads = 2
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        return ort.InferenceSession(str(model_dir / "model.onnx"), sess_options=opts)

    def run_with(sess: Any) -> Any:
        def run(text: str) -> Any:
            ids = np.array([tok.encode(text).ids], dtype=np.int64)
            feed = {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids),
            }
            return sess.run(None, feed)

        return run

    variants = {
        # the embedder's own query path (an older gitkb has none: its batch of one)
        "one_thread": getattr(emb, "embed_query", lambda text: emb.embed_batch([text])[0]),
        "two_threads_spinning": run_with(session(True)),
        "two_threads_no_spin": run_with(session(False)),
    }
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
    for q in qs[:5]:
        for fn in variants.values():
            fn(q)
    for q in qs:
        for name, fn in variants.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn(q)
            times[name].append(((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000))
    return {
        k: {"wall_p50_ms": pct([w for w, _ in v], 50), "cpu_p50_ms": pct([c for _, c in v], 50)}
        for k, v in times.items()
    } | {"load": load()}


def stages_table(r: dict[str, Any]) -> str:
    """One line per step: wall p50 and p95, CPU p50 (ms; ``total``'s CPU: every thread of the process)."""
    rows = [
        f"{k:>17} {v['wall_p50_ms']:>7} {v['wall_p95_ms']:>7} {v['cpu_p50_ms']:>7}"
        for k, v in r.items()
        if isinstance(v, dict)
    ]
    head = f"{r['mode']} search, {r['queries']} queries, load {r['load']}: step, wall p50, p95, CPU p50 (ms)"
    return "\n".join([head, *rows])


def keyword_ingest(name: str, root: Path) -> dict[str, Any]:
    from gitkb import Workspace

    with tempfile.TemporaryDirectory() as tmp, Workspace(Path(tmp) / "ws", embedding_provider="none") as ws:
        ok(ws.document_index("CREATE_INDEX", index_name=name, embeddings=False))
        r = ingest(ws, name, root, name)
        n = chunk_count(ws, name)
    mb = (
        sum(f.stat().st_size for f in (root / "docs").rglob("*") if f.is_file()) / 1e6
        if name == "awsdocs"
        else None
    )
    return {
        "keyword_ready_s": round(r["seconds"], 1),
        "documents": r["documents"],
        "chunks": n,
        "keyword_docs_per_s": round(r["documents"] / r["seconds"], 1),
        "keyword_chunks_per_s": round(n / r["seconds"], 1),
        "ingest_load": load(),
        "mb": round(mb, 1) if mb else None,
    }


def embed_sample(name: str, root: Path, chunks: int) -> dict[str, Any]:
    """Vectors-ready throughput of the real default model on the first documents holding ~``chunks`` chunks."""
    from gitkb import Workspace

    with tempfile.TemporaryDirectory() as tmp, Workspace(Path(tmp) / "ws") as ws:
        ws.ctx.embedding_worker.close()  # measured here, in the foreground
        ok(ws.document_index("CREATE_INDEX", index_name="sample"))
        if name == "awsdocs":
            sub = Path(tmp) / "docs"
            copy_tree(root / "docs", sub, max_chunks=chunks)
            ok(ws.document_index("ADD_DOCUMENTS", index_name="sample", filepath=str(sub), base_path=str(sub)))
        else:
            from gitkb.services.indexing.ingest_text import add_texts

            add_texts(ws.ctx, "sample", scifact_items(root, max(1, chunks // 2)))
        n = chunk_count(ws, "sample")
        v = build_vectors(ws)
    return {
        "sample_chunks": n,
        "sample_embed_s": round(v["seconds"], 1),
        "vectors_chunks_per_s": round(n / v["seconds"], 2),
    }


_SIZES: dict[Path, int] = {}


def _approx_chunks(f: Path) -> int:
    if f not in _SIZES:  # ~4 chars per word piece, ~207 pieces per chunk on awsdocs
        _SIZES[f] = max(1, round(f.stat().st_size / 4 / 230))
    return _SIZES[f]


def copy_tree(src: Path, dst: Path, *, max_chunks: int | None = None) -> int:
    """Copy markdown files of ``src`` (sorted) into ``dst`` until about ``max_chunks`` chunks; files copied."""
    n = est = 0
    for f in sorted(p for p in src.rglob("*") if p.is_file()):
        if max_chunks is not None and est >= max_chunks:
            break
        target = dst / f.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)
        n += 1
        est += _approx_chunks(f)
    return n


def grow(ws: Any, index: str, data: dict[str, Path], target: int, state: dict[str, Any], tmp: Path) -> float:
    """Add copies (``c<n>/`` prefixes) of the awsdocs pages and SciFact abstracts until ``index``
    holds at least ``target`` chunks; returns the keyword-ready seconds spent."""
    from gitkb.services.indexing.ingest_text import add_texts

    spent = 0.0
    aws = sorted(p for p in (data["awsdocs"] / "docs").rglob("*") if p.is_file())
    sci = scifact_items(data["scifact"])
    while state["chunks"] < target:
        copy, pos = state["copy"], state["pos"]
        if pos < len(aws):  # a batch of pages of this copy, sized to the chunks still missing
            need = target - state["chunks"]
            batch = []
            est = 0
            while pos < len(aws) and est < need:
                batch.append(aws[pos])
                est += _approx_chunks(aws[pos])
                pos += 1
            stage = tmp / f"stage{copy}_{pos}"
            for f in batch:
                t = stage / f"c{copy}" / f.relative_to(data["awsdocs"] / "docs")
                t.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, t)
            t0 = time.perf_counter()
            ok(
                ws.document_index(
                    "ADD_DOCUMENTS", index_name=index, filepath=str(stage), base_path=str(stage)
                )
            )
            spent += time.perf_counter() - t0
            shutil.rmtree(stage)
        else:  # then SciFact abstracts of this copy
            k = pos - len(aws)
            need = target - state["chunks"]
            take = sci[k : k + max(1, min(len(sci) - k, int(need / 1.8) + 1))]
            items = [{**it, "filepath": f"c{copy}/{it['filepath']}"} for it in take]
            t0 = time.perf_counter()
            add_texts(ws.ctx, index, items)
            spent += time.perf_counter() - t0
            pos += len(take)
            if pos - len(aws) >= len(sci):
                copy, pos = copy + 1, 0
        state["copy"], state["pos"] = copy, pos
        state["chunks"] = chunk_count(ws, index)
    return spent


# -- main ---------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    from gitkb import Workspace

    data = {"awsdocs": args.awsdocs, "scifact": args.scifact}
    home: Path = args.home
    home.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"corpora": {}, "scale": []}
    donors = [Workspace(p) for p in args.vectors_from]
    corpus_ws: list[Any] = []
    try:
        for name in args.corpora:
            row: dict[str, Any] = {"corpus": name}
            log(f"[{name}] keyword-ready ingest (fresh keyword-only index)")
            row.update(keyword_ingest(name, data[name]))
            if args.embed_sample:
                log(f"[{name}] vectors-ready throughput on a {args.embed_sample}-chunk sample (real model)")
                row.update(embed_sample(name, data[name], args.embed_sample))
                row["vectors_ready_est_s"] = round(row["chunks"] / row["vectors_chunks_per_s"])
            ws = Workspace(home / name)
            ws.ctx.embedding_worker.close()  # vectors are built (and timed) in the foreground
            corpus_ws.append(ws)
            if name not in ok(ws.document_index("LIST_INDICES"))["Indices"]:
                ok(ws.document_index("CREATE_INDEX", index_name=name))
                ingest(ws, name, data[name], name)
            if donors:
                row["vectors_copied"], row["vectors_missing"] = copy_vectors(ws, donors)
            log(f"[{name}] vectors of the whole corpus (embedded once, kept in {home / name})")
            v = build_vectors(ws)
            row["full_embedded"], row["full_embed_s"] = v["embedded"], round(v["seconds"], 1)
            qs = queries(name, data[name], args.queries)
            log(f"[{name}] latency, {len(qs)} queries per mode")
            lat = latency(ws, name, qs, ask=args.ask)
            if args.stages:
                row["stages"] = stages(ws, name, qs)
                log(stages_table(row["stages"]))
                row["embed_threads"] = embed_threads(ws, name, qs)
                log(f"query embedding alone (wall / CPU p50 ms): {json.dumps(row['embed_threads'])}")
            row.update({f"{m}_{k}": x for m, d in lat.items() if isinstance(d, dict) for k, x in d.items()})
            row["ask_p50_ms"], row["ask_load"] = lat.get("ask_p50_ms"), lat.get("ask_load")
            row["ask_repeat_p50_ms"] = lat.get("ask_repeat_p50_ms")
            row["peak_rss_mib"] = rss_mib()
            report["corpora"][name] = row
            log(json.dumps(row))
        if args.sizes:
            sources = corpus_ws + donors
            # Always grown from empty: a kept bigger index would make every size the largest one.
            shutil.rmtree(home / "scale", ignore_errors=True)
            with tempfile.TemporaryDirectory() as tmp, Workspace(home / "scale") as ws:
                ws.ctx.embedding_worker.close()
                if "scale" not in ok(ws.document_index("LIST_INDICES"))["Indices"]:
                    ok(ws.document_index("CREATE_INDEX", index_name="scale"))
                state = {"copy": 0, "pos": 0, "chunks": chunk_count(ws, "scale")}
                qs = queries("awsdocs", data["awsdocs"], args.queries // 2) + queries(
                    "scifact", data["scifact"], args.queries // 2
                )
                for size in args.sizes:
                    log(f"[scale] growing to {size} chunks")
                    kw_s = grow(ws, "scale", data, size, state, Path(tmp))
                    copied, missing = copy_vectors(ws, sources)
                    v = build_vectors(ws)
                    lat = latency(ws, "scale", qs, ask=args.ask)
                    if args.stages:
                        lat["stages"] = stages(ws, "scale", qs)
                        log(stages_table(lat["stages"]))
                    row = {
                        "chunks": state["chunks"],
                        "keyword_ingest_s": round(kw_s, 1),
                        "vectors_copied": copied,
                        "embedded": v["embedded"],
                        "vectors_s": round(v["seconds"], 1),
                    }
                    row.update(
                        {
                            f"{m}_{k}": x
                            for m, d in lat.items()
                            if m in MODES and isinstance(d, dict)
                            for k, x in d.items()
                        }
                    )
                    if "stages" in lat:
                        row["stages"] = lat["stages"]
                    row["ask_p50_ms"], row["ask_load"] = lat.get("ask_p50_ms"), lat.get("ask_load")
                    row["ask_repeat_p50_ms"] = lat.get("ask_repeat_p50_ms")
                    row["peak_rss_mib"] = rss_mib()
                    report["scale"].append(row)
                    log(json.dumps(row))
    finally:
        for w in corpus_ws + donors:
            w.close()
    report["peak_rss_mib"] = rss_mib()
    return report


def _lat(r: dict[str, Any], mode: str) -> str:
    """p50/p95 ms, the CPU of a query (all threads, p50) and the load average while it was measured."""
    return f"{r[f'{mode}_p50_ms']}/{r[f'{mode}_p95_ms']} (CPU {r[f'{mode}_cpu_p50_ms']}, load {r[f'{mode}_load']})"


def _ask(r: dict[str, Any]) -> str:
    """ASK p50 ms, the same questions asked again (cached vectors) and the load average."""
    return f"{r['ask_p50_ms']} (again {r.get('ask_repeat_p50_ms')}; load {r['ask_load']})"


def table(report: dict[str, Any]) -> str:
    lines = [
        "| corpus | docs | chunks | keyword-ready | vectors-ready (real model) | search p50/p95 ms keyword · semantic · hybrid | ASK p50 ms (asked again) | peak RSS |",
        "| --- | ---: | ---: | --- | --- | --- | ---: | ---: |",
    ]
    for name, r in report["corpora"].items():
        vec = f"{r.get('vectors_chunks_per_s', '?')} chunks/s (~{r.get('vectors_ready_est_s', '?')} s)"
        lat = " · ".join(_lat(r, m) for m in MODES)
        lines.append(
            f"| {name} | {r['documents']} | {r['chunks']} | {r['keyword_ready_s']} s ({r['keyword_docs_per_s']} docs/s, "
            f"{r['keyword_chunks_per_s']} chunks/s; load {r['ingest_load']}) "
            f"| {vec} | {lat} | {_ask(r)} | {r['peak_rss_mib']} MiB |"
        )
    if report["scale"]:
        lines += [
            "",
            "| chunks | search p50/p95 ms keyword | semantic | hybrid | ASK p50 ms (asked again) | peak RSS |",
            "| ---: | --- | --- | --- | ---: | ---: |",
        ]
        for r in report["scale"]:
            lines.append(
                f"| {r['chunks']} | "
                + " | ".join(_lat(r, m) for m in MODES)
                + f" | {_ask(r)} | {r['peak_rss_mib']} MiB |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--home", type=Path, required=True, help="kept workspaces: HOME/awsdocs, HOME/scifact, HOME/scale"
    )
    ap.add_argument("--awsdocs", type=Path, default=DATA / "awsdocs")
    ap.add_argument("--scifact", type=Path, default=DATA / "scifact")
    ap.add_argument("--corpora", type=lambda s: [c for c in s.split(",") if c], default=list(CORPORA))
    ap.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",") if x], default=[1000, 10000, 100000]
    )
    ap.add_argument("--queries", type=int, default=100, help="queries per mode (default 100)")
    ap.add_argument("--ask", type=int, default=20, help="ASK calls (default 20; 0: none)")
    ap.add_argument(
        "--embed-sample", type=int, default=200, help="chunks embedded for the throughput figure (0: skip)"
    )
    ap.add_argument(
        "--vectors-from",
        type=Path,
        action="append",
        default=[],
        help="workspace whose stored vectors are reused by content hash (repeatable)",
    )
    ap.add_argument(
        "--stages",
        action="store_true",
        help="also print where one hybrid query's time goes (embed, ANN, keyword, resolve, fusion, envelope)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    report = run(args)
    print(json.dumps(report, indent=2) if args.json else table(report))
    return report


if __name__ == "__main__":
    main()
