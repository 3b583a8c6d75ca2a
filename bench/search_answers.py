"""Every SEARCH answer of a query mix, written out whole, to show a speed change leaves them as they
were (same hits, order, scores, snippets): dump with the tree before the change and with the one
after, on copies of the same home, then compare.

The queries are ``bench/scale.py``'s mix (awsdocs questions and SciFact claims, then word runs cut
from them; ``--n`` in all, half of each), each searched in every ``--modes`` mode with its query
embedded anew; ``took_ms`` is left out. Run by hand (opening a home takes its writer lease):

    PYTHONPATH=/tmp/base/src .venv/bin/python bench/search_answers.py dump --home /tmp/copy --index scale --out /tmp/before.json
    .venv/bin/python bench/search_answers.py dump --home /tmp/copy --index scale --out /tmp/after.json
    .venv/bin/python bench/search_answers.py compare /tmp/before.json /tmp/after.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402


def dump(home: Path, index: str, modes: list[str], n: int, out: Path) -> int:
    from gitkb import Workspace

    qs = scale.queries("awsdocs", scale.DATA / "awsdocs", n // 2) + scale.queries(
        "scifact", scale.DATA / "scifact", n - n // 2
    )
    answers: dict[str, Any] = {}
    with Workspace(home) as ws:
        ws.ctx.embedding_worker.close()
        for mode in modes:
            for q in qs:
                ws.ctx.caches.query_vectors.clear()
                r = scale.ok(ws.document_index("SEARCH", query=q, index_name=index, mode=mode))
                r.pop("took_ms", None)
                answers[f"{mode}|{q}"] = r
    out.write_text(json.dumps(answers, indent=1, sort_keys=True, ensure_ascii=False))
    return len(answers)


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """One line per search whose answer differs (or that only one side has)."""
    lines = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x == y:
            continue
        if x is None or y is None:
            lines.append(f"{key}: only in {'the second' if x is None else 'the first'}")
            continue
        rx, ry = x.get("Results", []), y.get("Results", [])
        at = next((i for i, (p, q) in enumerate(zip(rx, ry, strict=False)) if p != q), min(len(rx), len(ry)))
        lines.append(f"{key}: results differ from #{at + 1} ({len(rx)} against {len(ry)})")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--home", type=Path, required=True)
    d.add_argument("--index", required=True)
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--modes", default="hybrid,semantic,keyword")
    d.add_argument("--n", type=int, default=200)
    c = sub.add_parser("compare")
    c.add_argument("first", type=Path)
    c.add_argument("second", type=Path)
    args = ap.parse_args()
    if args.what == "dump":
        count = dump(args.home, args.index, [m for m in args.modes.split(",") if m], args.n, args.out)
        print(f"{count} answers written to {args.out}")
        return
    a, b = (json.loads(p.read_text()) for p in (args.first, args.second))
    lines = compare(a, b)
    print("\n".join(lines) if lines else f"identical: {len(a)} answers")
    sys.exit(1 if lines else 0)


if __name__ == "__main__":
    main()
