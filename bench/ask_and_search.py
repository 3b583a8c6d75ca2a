"""Search p50/p95 and ASK p50 for each search mode the workspace offers (issue: retrieval quality and ASK).

Corpus: ../shared/data/awsdocs (2,757 pages); queries: the 20 dev questions
plus 80 word windows cut from them (100 in all, fixed seed). A mode that
SEARCH refuses (no embeddings yet, mode not built) is listed with the reason.
Run by hand:

    .venv/bin/python bench/ask_and_search.py                  # keyword-only index, fresh tmp workspace
    .venv/bin/python bench/ask_and_search.py --embeddings --home /tmp/aws-ws   # all modes (embeds: slow)

``--home`` keeps the workspace, so a second run skips ingest and embedding.
Timings are wall-clock in this process, one query at a time, after 5 warm-up
queries per mode; on a shared machine compare ratios from one run.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, queries_from_dev  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "awsdocs"
MODES = ("keyword", "semantic", "hybrid")


def timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1000, out


def bench_mode(ws: Any, index: str, mode: str, queries: list[str], ask_n: int) -> dict[str, Any]:
    probe = ws.document_index("SEARCH", query=queries[0], index_name=index, mode=mode)
    if not probe.get("Success"):
        return {"mode": mode, "unavailable": probe.get("Error", "refused")}
    for q in queries[:5]:
        ws.document_index("SEARCH", query=q, index_name=index, mode=mode)
    search_ms = [
        timed(lambda q=q: ws.document_index("SEARCH", query=q, index_name=index, mode=mode))[0]
        for q in queries
    ]
    search100_ms = [
        timed(lambda q=q: ws.document_index("SEARCH", query=q, index_name=index, mode=mode, top_n=100))[0]
        for q in queries[:20]
    ]
    ask_ms = []
    answered = 0
    for q in queries[:ask_n]:
        ms, r = timed(lambda q=q: ws.document_index("ASK", query=q, index_name=index, mode=mode))
        assert r.get("Success"), r
        ask_ms.append(ms)
        answered += bool(r["answered"])
    return {
        "mode": mode,
        "search_p50_ms": round(pct(search_ms, 50), 2),
        "search_p95_ms": round(pct(search_ms, 95), 2),
        "search_top100_p50_ms": round(pct(search100_ms, 50), 2),
        "ask_p50_ms": round(pct(ask_ms, 50), 2),
        "ask_p95_ms": round(pct(ask_ms, 95), 2),
        "ask_answered": f"{answered}/{len(ask_ms)}",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=Path, default=DATA / "docs")
    ap.add_argument("--questions", type=Path, default=DATA / "questions.dev.jsonl")
    ap.add_argument("--home", type=Path, help="workspace to build or reuse (default: a temporary one)")
    ap.add_argument(
        "--embeddings", action="store_true", help="index with embeddings and wait for them (slow)"
    )
    ap.add_argument("--ask", type=int, default=50, help="ASK calls per mode (default 50)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args()
    from gitkb import Workspace

    tmp = None
    home = args.home
    if home is None:
        tmp = tempfile.TemporaryDirectory()
        home = Path(tmp.name) / "ws"
    index = "aws" if args.embeddings else "aws-keyword"
    rows: list[dict[str, Any]] = []
    with Workspace(home) as ws:
        if index not in ws.document_index("LIST_INDICES")["Indices"]:
            assert ws.document_index("CREATE_INDEX", index_name=index, embeddings=args.embeddings)["Success"]
        ms, r = timed(
            lambda: ws.document_index(
                "ADD_DOCUMENTS", index_name=index, filepath=str(args.docs), base_path=str(args.docs)
            )
        )
        assert r["Success"], r
        print(
            f"ingest (keyword-ready): {ms / 1000:.1f} s, {r['counts']['added'] + r['counts']['modified']} "
            f"documents written, {r['counts']['unchanged']} unchanged",
            file=sys.stderr,
        )
        if args.embeddings:
            ms, r = timed(lambda: ws.build_embeddings())
            print(f"embeddings: {ms / 1000:.1f} s ({r.get('Message', r.get('Error'))})", file=sys.stderr)
        queries = queries_from_dev(args.questions)
        for mode in MODES:
            rows.append(bench_mode(ws, index, mode, queries, args.ask))
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.json:
        print(json.dumps({"rows": rows, "peak_rss_mib": round(peak_mib)}, indent=2))
    else:
        cols = [
            "mode",
            "search_p50_ms",
            "search_p95_ms",
            "search_top100_p50_ms",
            "ask_p50_ms",
            "ask_p95_ms",
            "ask_answered",
        ]
        print(" | ".join(cols))
        for row in rows:
            if "unavailable" in row:
                print(f"{row['mode']} | unavailable: {row['unavailable']}")
            else:
                print(" | ".join(str(row[c]) for c in cols))
        print(f"peak RSS {peak_mib:.0f} MiB")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
