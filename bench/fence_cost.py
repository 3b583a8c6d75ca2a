"""What fencing the writer costs (issue 18): a keyword-only ingest of ../shared/data/awsdocs with the
lease fence on (as shipped) and off, in one process, alternating. Prints the write transactions the
fence checked (one primary-key read of ``writer_lease`` each) and the process CPU of each run
(``time.process_time``: this process's threads, not the chunking worker, not wall time), then the
cost of one check alone (mean of 500 inside one write transaction).

    .venv/bin/python bench/fence_cost.py [--docs ../shared/data/awsdocs/docs] [--runs 1]
        [--catalog-url postgresql://...]   # a PostgreSQL database to reset and use (default: SQLite)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "awsdocs"

CHECKS = [0]


def _count_checks() -> None:
    from gitkb.stores import node_lease

    real = node_lease.check_holder

    def counted(conn: Any, token: str | None) -> None:
        CHECKS[0] += 1
        real(conn, token)

    node_lease.check_holder = counted  # type: ignore[assignment]


def _reset(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")


def run_once(docs: Path, fenced: bool, url: str | None) -> tuple[int, float, int]:
    from gitkb import Workspace
    from gitkb.stores.node_lease import WriterLease

    real_fence = WriterLease.fence
    if not fenced:
        WriterLease.fence = lambda self: None  # type: ignore[assignment,method-assign,return-value]
    if url:
        _reset(url)
    try:
        with tempfile.TemporaryDirectory() as tmp, Workspace(Path(tmp) / "ws", catalog_url=url) as ws:
            assert ws.document_index("CREATE_INDEX", index_name="aws", embeddings=False)["Success"]
            CHECKS[0] = 0
            c0 = time.process_time()
            r = ws.document_index("ADD_DOCUMENTS", index_name="aws", filepath=str(docs))
            cpu = time.process_time() - c0
            assert r["Success"], r
            return CHECKS[0], cpu, int(r["counts"]["added"])
    finally:
        WriterLease.fence = real_fence  # type: ignore[method-assign]


def one_check(url: str | None, n: int = 500) -> tuple[float, float]:
    """The CPU and wall time of one fence check (microseconds, mean of ``n``) inside a write transaction."""
    from gitkb import Workspace

    if url:
        _reset(url)
    with tempfile.TemporaryDirectory() as tmp, Workspace(Path(tmp) / "ws", catalog_url=url) as ws:
        fence = ws.ctx.lease.fence()
        with ws.ctx.catalog.write() as conn:
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(n):
                fence(conn)
            return (time.process_time() - c0) / n * 1e6, (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--docs", type=Path, default=DATA / "docs")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--catalog-url", default=None)
    a = p.parse_args()
    _count_checks()
    engine = "postgresql" if a.catalog_url else "sqlite"
    for i in range(a.runs):
        for fenced in (False, True) if i % 2 == 0 else (True, False):
            load = os.getloadavg()[0]
            checks, cpu, docs = run_once(a.docs, fenced, a.catalog_url)
            print(
                f"{engine} fence {'on ' if fenced else 'off'}: {docs} docs, {checks} fenced write transactions, "
                f"process CPU {cpu:.2f} s (load average {load:.1f} on {os.cpu_count()} cores)",
                flush=True,
            )
    cpu, wall = one_check(a.catalog_url)
    print(f"{engine}: one fence check {cpu:.0f} us CPU, {wall:.0f} us wall (mean of 500)")


if __name__ == "__main__":
    main()
