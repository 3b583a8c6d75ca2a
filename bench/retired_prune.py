"""What the writer's retired-chunk prune costs (part ops21): a catalog holding ``--rows`` retired
chunks (200-character texts, one a millisecond over the last 10 days): the first prune (it checks
every row for a live chunk once), then one with nothing due (the usual case: the idle writer every
minute), then one with 1,000 rows due. Prints each prune's wall time and, on SQLite, the plans of its
DELETEs.

    .venv/bin/python bench/retired_prune.py [--rows 200000]
        [--catalog-url postgresql://.../db]   # an empty PostgreSQL database to use (default: SQLite)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from gitkb.stores.catalog import open_catalog
from gitkb.stores.catalog.retired import prune

COLUMNS = (
    "chunk_id, index_id, document_id, path, source_uri, origin, metadata, line_start, line_end,"
    " char_start, char_end, text, retired_at"
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--catalog-url", default=None)
    args = ap.parse_args()
    cat = open_catalog(args.catalog_url, Path(tempfile.mkdtemp()) / "catalog.sqlite3")
    now, n = time.time(), args.rows
    start = now - 10 * 86_400.0
    with cat.write() as conn:
        conn.executemany(
            f"INSERT INTO retired_chunks({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    f"kchk_{i:032d}",
                    "idx",
                    "doc",
                    "p.md",
                    None,
                    "git",
                    "{}",
                    1,
                    2,
                    0,
                    200,
                    "x" * 200,
                    start + i / 1000,
                )
                for i in range(n)
            ],
        )
    runs = (("first", now - 30 * 86_400.0), ("nothing due", now - 30 * 86_400.0), ("1000 due", start + 1.0))
    for label, before in runs:
        t = time.perf_counter()
        with cat.write() as conn:
            aged, live = prune(conn, before=before)
        ms = (time.perf_counter() - t) * 1000
        print(f"{cat.backend['engine']}: {n} rows, {label}: removed {aged} (+{live} live) in {ms:.2f} ms")
    if args.catalog_url is None:
        for sql in (
            "DELETE FROM retired_chunks WHERE retired_at < ?",
            "DELETE FROM retired_chunks WHERE retired_at >= ? AND EXISTS (SELECT 1 FROM chunks c"
            " WHERE c.index_id = retired_chunks.index_id AND c.id = retired_chunks.chunk_id)",
        ):
            print("plan:", [tuple(r)[-1] for r in cat.conn.execute(f"EXPLAIN QUERY PLAN {sql}", (0.0,))])
    cat.close()


if __name__ == "__main__":
    main()
