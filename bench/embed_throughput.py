"""Embedding throughput: raw fastembed TextEmbedding vs gitkb's Embedder wrapper, same chunks, same run.

Not a test: prints figures. Usage:

    .venv/bin/python bench/embed_throughput.py [--chunks 200] [--tokens 200] [--batch-size 8]
        [--threads N] [--repeat 2] [--docs ../shared/data/awsdocs/docs]

Chunks are consecutive ~``--tokens``-token slices (cut at the model tokenizer's
offsets) of the awsdocs markdown files, taken in sorted path order. Both sides
load the same assembled model folder with the same thread count and batch
size; each side is warmed up, then timed ``--repeat`` times alternately, best
time kept. Peak RSS covers the whole process (both ONNX sessions are loaded).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

from tokenizers import Tokenizer

from gitkb.core.embedders import create_embedder
from gitkb.core.embedders.fastembed_minilm import FastEmbedMiniLM, default_threads, register_custom_model

DEFAULT_DOCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "awsdocs" / "docs"


def load_chunks(docs: Path, n: int, tokens: int, tokenizer: Tokenizer) -> list[str]:
    chunks: list[str] = []
    for path in sorted(docs.rglob("*.md")):
        text = path.read_text(encoding="utf-8", errors="replace")
        offsets = tokenizer.encode(text, add_special_tokens=False).offsets
        for start in range(0, len(offsets) - tokens // 2, tokens):
            window = offsets[start : start + tokens]
            chunk = text[window[0][0] : window[-1][1]].strip()
            if chunk:
                chunks.append(chunk)
            if len(chunks) == n:
                return chunks
    if len(chunks) < n:
        sys.exit(f"only {len(chunks)} chunks found under {docs}")
    return chunks


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=Path, default=DEFAULT_DOCS)
    ap.add_argument("--chunks", type=int, default=200)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=default_threads())
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cache-dir", type=Path, default=None)
    args = ap.parse_args()

    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="gitkb-bench-"))
    t0 = time.perf_counter()
    wrapper = create_embedder(
        "fastembed",
        "all-minilm-l6-v2",
        cache_dir=cache,
        options={"batch_size": args.batch_size, "threads": args.threads},
    )
    assert isinstance(wrapper, FastEmbedMiniLM)
    load_s = time.perf_counter() - t0
    from fastembed import TextEmbedding

    raw = TextEmbedding(
        register_custom_model(),
        cache_dir=str(cache),
        threads=args.threads,
        providers=["CPUExecutionProvider"],
        specific_model_path=str(wrapper.model_dir),
        local_files_only=True,
    )
    tokenizer = Tokenizer.from_file(str(wrapper.model_dir / "tokenizer.json"))
    tokenizer.no_truncation()  # tokenizer.json itself truncates at 128
    chunks = load_chunks(args.docs, args.chunks, args.tokens, tokenizer)
    counts = wrapper.count_tokens(chunks)
    print(
        f"chunks: {len(chunks)}  tokens/chunk mean {sum(counts) / len(counts):.0f} "
        f"(max {max(counts)}, clipped >256: {sum(c > 256 for c in counts)})"
    )
    print(f"threads: {args.threads}  batch size: {args.batch_size}  wrapper load: {load_s:.2f} s")

    def run_raw() -> float:
        t = time.perf_counter()
        out = [v.tolist() for v in raw.embed(chunks, batch_size=args.batch_size)]
        assert len(out) == len(chunks)
        return time.perf_counter() - t

    def run_wrapper() -> float:
        t = time.perf_counter()
        out = wrapper.embed_batch(chunks)
        assert len(out) == len(chunks)
        return time.perf_counter() - t

    list(raw.embed(chunks[:16], batch_size=args.batch_size))
    wrapper.embed_batch(chunks[:16])
    raw_s: list[float] = []
    wrap_s: list[float] = []
    for _ in range(args.repeat):
        raw_s.append(run_raw())
        wrap_s.append(run_wrapper())
    raw_rate = len(chunks) / min(raw_s)
    wrap_rate = len(chunks) / min(wrap_s)
    print(f"raw fastembed:   {raw_rate:6.1f} chunks/s  (runs: {', '.join(f'{s:.2f}s' for s in raw_s)})")
    print(f"gitkb embedder:  {wrap_rate:6.1f} chunks/s  (runs: {', '.join(f'{s:.2f}s' for s in wrap_s)})")
    print(f"ratio wrapper/raw: {wrap_rate / raw_rate:.3f}  (goal >= 0.90)")
    print(f"peak RSS: {peak_rss_mib():.0f} MiB (both models loaded)")


if __name__ == "__main__":
    main()
