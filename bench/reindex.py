"""Incremental reindex on ../shared/data/awsdocs (issue: status and jobs).

Copies 10% and then 100% of the 2,757 pages to a temp dir, ingests them
keyword-only, then times: a no-change reindex, and a reindex after touching
(rewriting) one file. Run by hand:

    .venv/bin/python bench/reindex.py
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO.parent / "shared" / "data" / "awsdocs" / "docs"


def run(fraction: float) -> None:
    from gitkb import Workspace

    files = sorted(DOCS.rglob("*.md"))
    files = files[: max(1, int(len(files) * fraction))]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "docs"
        for f in files:
            dst = root / f.relative_to(DOCS)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dst)
        with Workspace(Path(tmp) / "ws") as ws:
            ws.document_index("CREATE_INDEX", index_name="aws", embeddings=False)
            t = time.perf_counter()
            r = ws.document_index("ADD_DOCUMENTS", index_name="aws", filepath=str(root))
            ingest = time.perf_counter() - t
            t = time.perf_counter()
            nochange = ws.reindex()
            t_none = time.perf_counter() - t
            target = root / files[len(files) // 2].relative_to(DOCS)
            target.write_text(target.read_text() + "\n\nAn added paragraph about quota increases.\n")
            t = time.perf_counter()
            one = ws.reindex()
            t_one = time.perf_counter() - t
            assert one["modified"] == [f"docs/{target.relative_to(root)}"], one
            print(
                f"{len(files):5d} files ({fraction:.0%}): ingest {ingest:.2f} s ({r['counts']['added'] / ingest:.0f} docs/s); "
                f"no-change reindex {t_none * 1000:.0f} ms ({nochange['unchanged']} unchanged); "
                f"1-file reindex {t_one * 1000:.0f} ms"
            )


if __name__ == "__main__":
    for frac in (0.1, 1.0):
        run(frac)
