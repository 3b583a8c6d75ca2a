"""Run an evaluation: make sure the index holds the data, ask every query through SEARCH, score.

Retrieval goes through the public SEARCH service, so every mode it offers is
measured the same way. Documents are cut into chunks; a document's rank is
the rank of its best chunk (chunk hits collapse to documents in order).

``eval_beir``: each corpus entry becomes one document ``corpus/<_id>.txt``
(title, blank line, text), written in bulk; a hit whose document id equals
the query id is dropped, as BEIR does. ``eval_qa``: ``docs/`` is added with
ADD_DOCUMENTS (paths relative to ``docs/``, like the questions' ``doc``);
the gold document of each question is the single relevant one, and ASK is
checked for citing it.

Indexes are reused: the default name is derived from the folder and the mode
(``eval-beir-scifact-keyword``), and a second run only re-checks hashes.
A ``keyword`` run creates a keyword-only index (no embedding); a semantic or
hybrid run waits until every chunk has its vector before querying.

BEIR chunking defaults to ``one_chunk_per_doc``: a BEIR corpus entry is the
unit that is judged and that published baselines score whole, and Recall@100
needs 100 distinct documents while SEARCH returns at most ``MAX_TOP_N`` hits
(with the ``auto`` chunking, SciFact's 5,183 abstracts become ~9,500 chunks
and 100 hits hold ~70 documents). Pass ``chunk_strategy="auto"`` (CLI
``--chunk-strategy auto``) to measure the product's default chunking instead.

Queries ask for 100 hits (BEIR) or 50 (QA) by default: deeper than the HNSW search depth
(``[chroma] ef_search``; Chroma searches at least as deep as the hits asked for), so a change of
depth never shows. ``top_n`` (CLI ``--top-n 10``) asks for what a caller asks for instead and
measures what it gets (``top_n`` and ``search_depth`` in the output; Recall@100 of a 10-deep list
counts only those 10).
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from typing import Any

from gitkb.core.errors import Busy, InvalidArgument
from gitkb.services.context import Context
from gitkb.services.derived import embeddings
from gitkb.services.evaluation.answers import lead_recall
from gitkb.services.evaluation.datasets import doc_id_from_path, doc_path, load_beir, load_qa
from gitkb.services.evaluation.metrics import evaluate
from gitkb.services.indexing import indexes as index_service
from gitkb.services.indexing import ingest, ingest_text
from gitkb.services.retrieval import ask as ask_service
from gitkb.services.retrieval import search as search_service
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog.indexes import IndexRow

MODES = ("keyword", "semantic", "hybrid")
BEIR_MEASURES = ("ndcg@10", "recall@10", "recall@100", "mrr@10")
QA_MEASURES = ("recall@1", "recall@5", "recall@10", "mrr@10")
QA_DEPTH = 50  # chunk hits fetched per question; enough for 10 distinct documents
BEIR_DEPTH = 100
BEIR_CHUNKING = "one_chunk_per_doc"
Progress = Callable[[str, int, int], None]  # (stage, done, total)


def _mode(mode: Any) -> str:
    if mode is None:
        return "keyword"
    if mode not in MODES:
        raise InvalidArgument(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return str(mode)


def default_index_name(kind: str, dataset: str, mode: str) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", dataset).strip("-.") or "data"
    return f"eval-{kind}-{base}" + ("-keyword" if mode == "keyword" else "")


def ensure_index(ctx: Context, name: str, mode: str) -> tuple[IndexRow, bool]:
    """The index to evaluate (created if missing); refuses a keyword-only index for semantic/hybrid.

    Evaluation writes in bulk, in this process: it needs the workspace's writer lease.
    """
    if not ctx.is_writer:
        raise Busy(
            f"another gitkb process (a server?) holds the writer lease of {ctx.settings.home}; evaluation writes in bulk",
            next_steps=["stop that process, or evaluate in a separate workspace: gitkb --home DIR eval ..."],
        )
    row = index_rows.get_by_name(ctx.catalog.conn, name)
    created = False
    if row is None:
        index_service.create_index(ctx, name, embeddings=mode != "keyword")
        created = True
    row = index_service.get_index(ctx, name)
    if mode != "keyword" and not row.embeddings:
        raise InvalidArgument(
            f"index {name!r} is keyword-only; a {mode} evaluation needs embeddings",
            next_steps=[
                "run with --mode keyword, or pass --index with a new name to build an index with embeddings"
            ],
        )
    return row, created


def wait_for_vectors(ctx: Context, mode: str, progress: Progress | None) -> float:
    """Block until vectors catch up (semantic/hybrid); seconds spent."""
    if mode == "keyword":
        return 0.0

    t0 = time.perf_counter()
    embeddings.build_embeddings(ctx, progress=_tick(progress, "embed"))
    return time.perf_counter() - t0


def _tick(progress: Progress | None, stage: str) -> Callable[[int, int], None] | None:
    if progress is None:
        return None
    return lambda done, total: progress(stage, done, total)


def _ranked_docs(
    ctx: Context, query: str, index_name: str, mode: str, depth: int, key: Callable[[str], str | None]
) -> list[str]:
    res = search_service.search(ctx, query, index_name=index_name, top_n=depth, mode=mode)
    out: dict[str, None] = {}
    for hit in res["Results"]:
        k = key(hit["filepath"])
        if k is not None:
            out.setdefault(k)
    return list(out)


def _run_queries(
    ctx: Context,
    queries: dict[str, str],
    index_name: str,
    mode: str,
    depth: int,
    key: Callable[[str], str | None],
    progress: Progress | None,
) -> tuple[dict[str, list[str]], list[float]]:
    run: dict[str, list[str]] = {}
    took: list[float] = []
    total = len(queries)
    for i, (qid, text) in enumerate(queries.items(), 1):
        t0 = time.perf_counter()
        run[qid] = _ranked_docs(ctx, text, index_name, mode, depth, key)
        took.append((time.perf_counter() - t0) * 1000)
        if progress and (i % 25 == 0 or i == total):
            progress("search", i, total)
    return run, took


def _p(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return round(s[min(len(s) - 1, int(round(q * (len(s) - 1))))], 2)


def eval_beir(
    ctx: Context,
    path: Any,
    *,
    split: str = "train",
    mode: Any = None,
    index_name: Any = None,
    chunk_strategy: Any = None,
    chunk_size: Any = None,
    chunk_overlap: Any = None,
    top_n: Any = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    m = _mode(mode)
    depth = _depth(top_n, min(search_service.MAX_TOP_N, BEIR_DEPTH))
    data = load_beir(path, split)
    if chunk_strategy is None and chunk_size is None and chunk_overlap is None:
        chunk_strategy = BEIR_CHUNKING
    name = index_name or default_index_name("beir", data.name, m)
    row, created = ensure_index(ctx, name, m)
    t0 = time.perf_counter()
    items = [
        {"text": d.body(), "filepath": doc_path(d.id), "metadata": {"title": d.title}} for d in data.corpus
    ]
    added = ingest_text.add_texts(
        ctx,
        row.name,
        items,
        chunk_strategy=chunk_strategy,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        progress=_tick(progress, "ingest"),
    )
    ingest_s = time.perf_counter() - t0
    embed_s = wait_for_vectors(ctx, m, progress)
    run, took = _run_queries(ctx, data.queries, row.name, m, depth, doc_id_from_path, progress)
    for qid, docs in run.items():  # BEIR: a document never answers its own query
        run[qid] = [d for d in docs if d != qid]
    scores = evaluate(data.qrels, run, BEIR_MEASURES)
    out: dict[str, Any] = {k: round(v, 4) for k, v in scores.items() if k != "queries"}
    out.update(
        queries=scores["queries"],
        mode=m,
        dataset=data.name,
        split=split,
        index_name=row.name,
        documents=len(data.corpus),
        documents_written=added["counts"]["added"] + added["counts"]["modified"],
        index_reused=not created,
        chunk_strategy=added["chunk_config"]["chunk_strategy"],
        chunk_size=added["chunk_config"]["chunk_size"],
        top_n=top_n,
        search_depth=depth,
        mean_docs_retrieved=round(statistics.fmean(len(v) for v in run.values()), 1) if run else 0.0,
        ingest_seconds=round(ingest_s, 2),
        embed_seconds=round(embed_s, 2),
        search_seconds=round(sum(took) / 1000, 2),
        search_p50_ms=_p(took, 0.5),
        search_p95_ms=_p(took, 0.95),
    )
    out["Message"] = (
        f"{data.name} ({split}, {m}, {out['queries']} queries): nDCG@10 {out['ndcg@10']:.4f}, "
        f"R@10 {out['recall@10']:.4f}, R@100 {out['recall@100']:.4f}, MRR@10 {out['mrr@10']:.4f}" + _at(top_n)
    )
    return out


def _depth(top_n: Any, default: int) -> int:
    """The hits each query asks for: ``top_n`` (checked as SEARCH checks it) or the deep default."""
    return default if top_n is None else search_service.validate_top_n(top_n)


def _at(top_n: Any) -> str:
    return "" if top_n is None else f" (at top_n {top_n}, as a caller searches)"


def eval_qa(
    ctx: Context,
    path: Any,
    *,
    mode: Any = None,
    index_name: Any = None,
    ask: bool = True,
    top_n: Any = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    m = _mode(mode)
    depth = _depth(top_n, QA_DEPTH)
    data = load_qa(path)
    name = index_name or default_index_name("qa", data.name, m)
    row, created = ensure_index(ctx, name, m)
    t0 = time.perf_counter()
    added = ingest.add_documents(
        ctx, row.name, str(data.docs_dir), base_path=str(data.docs_dir), progress=_tick(progress, "ingest")
    )
    ingest_s = time.perf_counter() - t0
    embed_s = wait_for_vectors(ctx, m, progress)
    queries = {q.id: q.question for q in data.questions}
    qrels = {q.id: {q.doc: 1} for q in data.questions}
    run, took = _run_queries(ctx, queries, row.name, m, depth, lambda p: p, progress)
    scores = evaluate(qrels, run, QA_MEASURES)
    out: dict[str, Any] = {k: round(v, 4) for k, v in scores.items() if k != "queries"}
    out.update(
        questions=scores["queries"],
        queries=scores["queries"],
        mode=m,
        dataset=data.name,
        index_name=row.name,
        documents_written=added["counts"]["added"] + added["counts"]["modified"],
        index_reused=not created,
        top_n=top_n,
        search_depth=depth,
        ingest_seconds=round(ingest_s, 2),
        embed_seconds=round(embed_s, 2),
        search_p50_ms=_p(took, 0.5),
        search_p95_ms=_p(took, 0.95),
    )
    cited: dict[str, bool] = {}
    if ask:
        out.update(_ask_checks(ctx, data.questions, row.name, m, progress, cited))
    out["misses"] = misses(run, qrels, cited)
    msg = (
        f"{data.name} ({m}, {out['questions']} questions): R@1 {out['recall@1']:.4f}, R@5 {out['recall@5']:.4f}, "
        f"R@10 {out['recall@10']:.4f}, MRR@10 {out['mrr@10']:.4f}" + _at(top_n)
    )
    if ask:
        msg += (
            f"; ASK cites the gold document {out['ask_cites_gold']:.4f}, answered {out['ask_answered']:.4f}, "
            f"lead recall {out['ask_lead_recall']:.4f}"
        )
    out["Message"] = msg
    return out


def misses(
    run: dict[str, list[str]], qrels: dict[str, dict[str, int]], cited: dict[str, bool]
) -> list[dict[str, Any]]:
    """The questions to look at one by one: gold document not ranked first, or (when ASK ran) not
    cited; each with the gold's rank among the documents (None past the depth searched)."""
    out = []
    for qid, judged in qrels.items():
        docs = run.get(qid, [])
        gold = next(iter(judged))
        rank = docs.index(gold) + 1 if gold in docs else None
        if rank != 1 or not cited.get(qid, True):
            miss: dict[str, Any] = {"id": qid, "gold_rank": rank, "first": docs[0] if docs else None}
            if qid in cited:
                miss["ask_cites_gold"] = cited[qid]
            out.append(miss)
    return out


def _ask_checks(
    ctx: Context,
    questions: list[Any],
    index_name: str,
    mode: str,
    progress: Progress | None,
    cited: dict[str, bool],
) -> dict[str, Any]:
    """ASK's figures over ``questions``; ``cited`` gets, per question id, whether ASK cited the gold.

    ASK's warnings (e.g. its meaning side failed and sentences went by words only) are not dropped:
    ``ask_warnings`` counts the answers that carried one, and ``Warnings`` names each distinct one
    with the ids of its questions, so a run with a downgrade does not pass for a plain one."""
    cites = answered = 0
    leads: list[float] = []
    took: list[float] = []
    warned: dict[str, list[str]] = {}  # warning -> question ids
    warned_ids: set[str] = set()
    for i, q in enumerate(questions, 1):
        t0 = time.perf_counter()
        res = ask_service.ask(ctx, q.question, index_name=index_name, mode=mode, answer_mode="extractive")
        took.append((time.perf_counter() - t0) * 1000)
        answered += bool(res["answered"])
        cited[q.id] = any(f["filepath"] == q.doc for f in res["Footnotes"])
        cites += cited[q.id]
        leads.append(lead_recall(res["Answer"], q.answer) if res["answered"] else 0.0)
        for w in res.get("Warnings") or []:
            warned.setdefault(str(w), []).append(q.id)
            warned_ids.add(q.id)
        if progress:
            progress("ask", i, len(questions))
    n = len(questions)
    out: dict[str, Any] = {
        "ask_cites_gold": round(cites / n, 4),
        "ask_answered": round(answered / n, 4),
        "ask_lead_recall": round(sum(leads) / n, 4),
        "ask_p50_ms": _p(took, 0.5),
        "ask_warnings": len(warned_ids),
    }
    if warned:
        out["Warnings"] = [
            f"ASK on {len(ids)} question(s) ({', '.join(ids)}): {w}" for w, ids in warned.items()
        ]
    return out
