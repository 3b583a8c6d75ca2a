"""Nodes that share one catalog: search with 1 and with 3 API nodes, ingest into the shared catalog,
and how long a new node takes to catch up.

    .venv/bin/python bench/multinode.py [--chunks 30000] [--duration 30] [--clients 8]
                                        [--postgres-url postgresql://user@host:port/db]

1. Ingest: synthetic markdown files (about ``--chunks`` chunks) through node A; documents/s into the
   catalog (a SQLite file outside every home, ``[catalog] url = "sqlite:////..."``); with
   ``--postgres-url`` the same ingest into that (empty) PostgreSQL database too, and the nodes run on it.
2. A new node catches up: a fresh home on the same catalog replays the change log into its own
   keyword index (seconds, chunks/s); then, after the writer compacted the log, another fresh node
   rebuilds from the catalog instead.
3. Search: ``--clients`` threads POST /search (hybrid) for ``--duration`` seconds, first against one
   server, then spread over three servers (separate homes, the same catalog); requests/s, p50, p95 and
   errors. On 2 cores the point is that nothing degrades, not a speedup.

Run it on a quiet machine; it prints the figures and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from gitkb import Workspace
from gitkb.core.config import Settings, load_settings
from gitkb.services.derived.catchup import catch_up_keywords
from gitkb.services.runtime import nodes
from gitkb.stores.catalog import changes

PARAGRAPHS = 10  # per file: one chunk each, about


def node_settings(home: Path, catalog_url: str) -> Settings:
    return load_settings(
        home, embedding_provider="hashing", embedding_model="hashing-384", catalog_url=catalog_url
    )


def serve(home: str, catalog: str) -> None:
    """The server child: one node on the shared catalog; prints its URL."""
    import uvicorn  # heavy: only the server child

    from gitkb.http.app import create_app  # heavy: fastapi

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    print(json.dumps({"url": f"http://127.0.0.1:{sock.getsockname()[1]}"}), flush=True)
    app = create_app(node_settings(Path(home), catalog))
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] if s else float("nan")


def file_text(i: int) -> str:
    filler = " ".join(f"word{(i * 31 + k) % 997}" for k in range(120))
    body = "\n\n".join(
        f"## Part {j}\n\nFile {i} part {j}: the runbook term{i} with drill{j}. {filler}"
        for j in range(PARAGRAPHS)
    )
    return f"# File {i}\n\n{body}\n"


def chunks_per_file(ws: Workspace) -> int:
    """How many chunks one file of the corpus makes (a probe index, dropped again)."""
    ws.document_index("CREATE_INDEX", index_name="probe")
    before = changes.head(ws.ctx.catalog.conn)
    ws.document_index("ADD_TEXT", index_name="probe", text=file_text(0), filepath="probe.md")
    n = changes.head(ws.ctx.catalog.conn) - before
    ws.document_index("DELETE_INDEX", index_name="probe")
    return max(1, n)


def write_corpus(root: Path, files: int) -> None:
    for i in range(files):
        path = root / f"g{i % 50:02}" / f"f{i:05}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(file_text(i))


def search_load(urls: list[str], clients: int, duration: float) -> dict[str, Any]:
    lat: list[float] = []
    errors = [0]
    stop = time.monotonic() + duration

    def client(k: int) -> None:
        url = urls[k % len(urls)]
        with httpx.Client(timeout=60) as http:
            n = 0
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                r = http.post(url + "/search", json={"query": f"runbook term{(k * 7919 + n) % 1000}"})
                lat.append(time.perf_counter() - t0)
                if r.status_code != 200 or r.json().get("Success") is not True:
                    errors[0] += 1
                n += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {
        "requests_per_s": round(len(lat) / duration, 1),
        "p50_ms": round(pct(lat, 50) * 1000, 1),
        "p95_ms": round(pct(lat, 95) * 1000, 1),
        "errors": errors[0],
    }


def start_server(home: Path, catalog: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(home), catalog], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    url = str(json.loads(proc.stdout.readline())["url"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    sys.exit(f"{url} did not come up")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=30000)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument(
        "--postgres-url", help="an empty PostgreSQL database: ingest into it too, run the nodes on it"
    )
    ap.add_argument("--serve", nargs=2, metavar=("HOME", "CATALOG"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(*args.serve)
        return
    out: dict[str, Any] = {"load_average_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="gitkb-multinode-") as tmp_s:
        tmp = Path(tmp_s)
        (tmp / "shared").mkdir()
        engines = {"sqlite": f"sqlite:///{tmp / 'shared' / 'catalog.sqlite3'}"}
        if args.postgres_url:
            engines["postgresql"] = args.postgres_url
        docs = tmp / "docs"
        files = 0
        for engine, url in engines.items():
            a = Workspace(settings=node_settings(tmp / f"a-{engine}", url))
            if not files:
                files = max(1, args.chunks // chunks_per_file(a))
                write_corpus(docs, files)
            a.document_index("CREATE_INDEX", index_name="kb")
            t0 = time.perf_counter()
            a.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(docs))
            took = time.perf_counter() - t0
            out[f"ingest_{engine}"] = {
                "documents": files,
                "seconds": round(took, 2),
                "docs_per_s": round(files / took, 1),
            }
            if engine != list(engines)[-1]:
                a.close()
        catalog = list(engines.values())[-1]  # the nodes below share the last one (PostgreSQL when given)
        chunks = len(a.ctx.keywords.all_cids())
        # a new node replays the log; after compaction another one rebuilds from the catalog
        for name, compact in (("catch_up_from_log", False), ("rebuild_after_compaction", True)):
            if compact:
                a.build_embeddings()
                out["compacted"] = nodes.compact(a.ctx)
            d = Workspace(settings=node_settings(tmp / name, catalog))
            if d.ctx.heartbeat is not None:
                d.ctx.heartbeat.stop()  # the measured catch-up only
            t0 = time.perf_counter()
            catch_up_keywords(d.ctx)
            secs = time.perf_counter() - t0
            out[name] = {"chunks": len(d.ctx.keywords.all_cids()), "seconds": round(secs, 2)}
            d.close()
        a.close()
        # search: one server, then three
        servers = [start_server(tmp / f"s{i}", catalog) for i in range(3)]
        try:
            for n in (1, 3):
                out[f"search_{n}_node"] = search_load(
                    [u for _, u in servers[:n]], args.clients, args.duration
                )
        finally:
            for proc, _ in servers:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
        out["chunks"] = chunks
    out["load_average_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
