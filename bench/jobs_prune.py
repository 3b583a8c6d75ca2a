"""What the writer's finished-job prune costs (part jobs23): a catalog holding ``--rows`` finished
jobs (5 kinds over 20 indexes, one finished every ``30 days / rows`` over the last 30 days, then
``--old`` more before that): the first prune (removes the old ones), then one with nothing due (an
idle writer), then one after a single job finished (what a busy server pays at most once a minute:
the plan reads every finished row still kept). Prints each prune's wall time, the rows read and
removed, with the load average.

    .venv/bin/python bench/jobs_prune.py [--rows 50000] [--old 20000]
        [--catalog-url postgresql://.../db]   # an empty PostgreSQL database to use (default: SQLite)
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from gitkb.stores.catalog import job_retention as jr
from gitkb.stores.catalog import open_catalog
from gitkb.stores.catalog.jobs import retention_key

DAY = 86_400.0
KINDS = ("action", "source_sync", "reindex", "build_embeddings", "purge_expired")
COLUMNS = "id, kind, params, state, created_at, started_at, finished_at, retention_key"


def _rows(n: int, start: float, span: float, tag: str) -> list[tuple[object, ...]]:
    out = []
    for i in range(n):
        t = start + span * i / max(n, 1)
        kind = KINDS[i % len(KINDS)]
        params = {"index_name": f"idx{i % 20}"}
        if kind == "action":
            params = {"action": "ADD_TEXT", "params": params}
        key = retention_key(kind, params)
        out.append((f"job_{tag}{i:020d}", kind, json.dumps(params), "completed", t, t, t + 0.5, key))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--old", type=int, default=20_000)
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--catalog-url", default=None)
    args = ap.parse_args()
    cat = open_catalog(args.catalog_url, Path(tempfile.mkdtemp()) / "catalog.sqlite3")
    now = time.time()
    kept = _rows(args.rows, now - args.days * DAY + 60, args.days * DAY - 120, "k")
    old = _rows(args.old, now - 2 * args.days * DAY, args.days * DAY - 120, "o")
    with cat.write() as conn:
        conn.executemany(f"INSERT INTO jobs({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", kept + old)
    before = now - args.days * DAY

    def prune(label: str) -> None:
        t = time.perf_counter()
        planned = jr.plan(cat.conn, before=before)
        read_ms = (time.perf_counter() - t) * 1000
        removed = 0
        if planned is not None:
            with cat.write() as conn:
                removed = jr.apply(conn, planned)
        ms = (time.perf_counter() - t) * 1000
        print(
            f"{cat.backend['engine']}: {args.rows} kept + {args.old} old finished jobs, {label}: removed"
            f" {removed} in {ms:.1f} ms (plan {read_ms:.1f} ms; load {os.getloadavg()[0]:.1f})"
        )

    while True:  # the first prune of an unpruned table goes MAX_PER_PRUNE at a time
        prune("first")
        if jr.plan(cat.conn, before=before) is None:
            break
    prune("nothing due")
    with cat.write() as conn:
        conn.execute(
            f"INSERT INTO jobs({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ("job_new", "reindex", "{}", "completed", now, now, now + 1, retention_key("reindex", {})),
        )
    prune("one job finished since")
    cat.close()


if __name__ == "__main__":
    main()
