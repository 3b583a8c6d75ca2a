"""Where a SEARCH's time goes (``bench/scale.py``'s ``--stages`` table) on a workspace that is already
built, without growing one: run it with one tree, then another (``PYTHONPATH=<other tree>/src``),
alternating, on a copy of the same home (opening it takes its writer lease), and compare the CPU of
each step. The queries are scale.py's mix (awsdocs questions and SciFact claims), each embedded anew.

    .venv/bin/python bench/hybrid_stages.py --home /tmp/copy-of-106k --index scale [--runs 3] [--mode hybrid]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--mode", choices=("hybrid", "semantic", "keyword"), default="hybrid")
    args = ap.parse_args()
    from gitkb import Workspace

    qs = scale.queries("awsdocs", scale.DATA / "awsdocs", args.queries // 2) + scale.queries(
        "scifact", scale.DATA / "scifact", args.queries - args.queries // 2
    )
    with Workspace(args.home) as ws:
        ws.ctx.embedding_worker.close()
        for _ in range(args.runs):
            print(scale.stages_table(scale.stages(ws, args.index, qs, mode=args.mode)), flush=True)


if __name__ == "__main__":
    main()
