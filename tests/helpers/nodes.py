"""Workspaces with separate homes sharing one catalog (nodes that share no files), the slow job
kind the failover tests kill a writer during, and ``ServeNode``: one ``gitkb serve`` child process
(tests/test_nodes_serve.py, tests/test_nodes_sync.py).

Each node's settings name the shared catalog by URL (``[catalog] url``): a SQLite file outside every
home, or a PostgreSQL database.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from gitkb.core.config import Settings, load_settings
from helpers import postgres
from helpers.wait import WaitTimeout, wait_until

SLOW_KIND = "test_slow_docs"


def node_settings(home: Path, catalog_url: str, nodes: dict[str, Any] | None = None) -> Settings:
    """A node at ``home`` (its ``gitkb.toml`` read as usual) on the shared catalog ``catalog_url``
    (``sqlite:////abs/path`` or ``postgresql://...``); ``nodes`` is its ``[nodes]`` section."""
    base = load_settings(
        home, embedding_provider="hashing", embedding_model="hashing-384", catalog_url=catalog_url
    )
    raw = {**base.raw, "nodes": {**dict(base.raw.get("nodes") or {}), **dict(nodes or {})}}
    return replace(base, raw=raw)


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{Path(path).absolute()}"


def _slow_docs(ctx: Any, params: dict[str, Any], progress: Any) -> dict[str, Any]:
    """Add ``n`` documents one by one (ADD_TEXT, idempotent by path), slowly: a crash lands mid-way."""
    from gitkb.services.dispatch import (
        actions,  # cycle: the test kind runs a service action like the job kinds
    )

    n = int(params["n"])
    for i in range(n):
        text = f"Document number {i} mentions the word marker{i} and the shared word failover."
        actions.run_action(
            ctx, "ADD_TEXT", {"index_name": params["index_name"], "text": text, "filepath": f"d{i}.md"}
        )
        progress(i + 1, n)
        time.sleep(float(params.get("sleep", 0.05)))
    return {"Message": f"added {n}"}


def add_slow_kind() -> None:
    from gitkb.services.runtime import jobs  # cycle: loaded after gitkb, as the composition root loads kinds

    jobs.add_kind(SLOW_KIND, jobs.JobKind(_slow_docs))


def child_writer(home: str, catalog_url: str, nodes_json: str) -> None:
    """A child process: open a node (it takes the lease when free), say so, and wait to be killed."""
    from gitkb import Workspace  # cycle: kept off the helpers' import for the parent

    add_slow_kind()
    ws = Workspace(settings=node_settings(Path(home), catalog_url, json.loads(nodes_json)))
    print(json.dumps({"writer": ws.ctx.is_writer, "node_id": ws.ctx.node_id}), flush=True)
    sys.stdin.read()  # until the parent closes our stdin (or kills us)
    ws.close()


def serve_child(home: str, catalog_url: str) -> None:
    """A child process: ``gitkb serve`` of one node on the shared catalog file; prints its URL."""
    import socket

    import uvicorn  # heavy: only the server child needs it

    from gitkb.http.app import create_app  # heavy: fastapi

    settings = node_settings(Path(home), catalog_url)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(json.dumps({"url": f"http://127.0.0.1:{sock.getsockname()[1]}"}), flush=True)
    config = uvicorn.Config(create_app(settings), log_level="warning", timeout_graceful_shutdown=10)
    uvicorn.Server(config).run(sockets=[sock])


class ServeNode:
    """``gitkb serve`` of one node (``serve_child``) on ``catalog``, with its own ``home``."""

    def __init__(self, home: Path, catalog: str, env: dict[str, str]) -> None:
        code = "import sys; from helpers.nodes import serve_child; serve_child(*sys.argv[1:])"
        self.home = home
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, str(home), catalog], stdout=subprocess.PIPE, text=True, env=env
        )
        assert self.proc.stdout is not None
        self.url = json.loads(self.proc.stdout.readline())["url"]
        wait_until(self._up, timeout=60, interval=0.2, what=f"{self.url} to come up")

    def _up(self) -> bool:
        try:
            return httpx.get(self.url + "/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def get(self, path: str) -> Any:
        return httpx.get(self.url + path, timeout=60)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return httpx.post(self.url + path, json=body, timeout=60)

    def writer(self) -> bool:
        return bool(self.get("/readyz").json()["writer"])

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)


def finished(n: ServeNode, body: dict[str, Any]) -> dict[str, Any]:
    """The result of an answer that may be a job (``status: working``): waited for, completed."""
    if body.get("status") != "working":
        return body

    def done() -> dict[str, Any] | None:
        job = n.get(f"/jobs/{body['job_id']}").json()
        return dict(job) if job["status"] in ("completed", "failed", "cancelled") else None

    job = wait_until(done, timeout=180, interval=0.1, what=f"job {body['job_id']}")
    assert job["status"] == "completed", job
    return dict(job["result"])


def keyword_paths(n: ServeNode, query: str, index: str = "kb") -> list[str]:
    r = n.post("/search", {"query": query, "index_name": index, "mode": "keyword"})
    assert r.status_code == 200, r.text
    return [h["filepath"] for h in r.json()["Results"]]


STATUS_SHOWN = (
    "queue_depth",
    "in_flight_job",
    "dirty_paths",
    "dirty_embeddings",
    "writer",
    "vector_build",
    "status",
)


def wait_caught_up(n: ServeNode, timeout: float = 120) -> None:
    """Until ``/status`` of ``n`` says ``caught_up`` (its keyword index and the vectors); the last
    status is in the failure."""
    last: list[Any] = []

    def caught_up() -> bool:
        st = n.get("/status").json()
        last[:] = [{k: st.get(k) for k in STATUS_SHOWN}]
        return bool(st["caught_up"])

    try:
        wait_until(caught_up, timeout=timeout, interval=0.5, what=f"{n.url} to catch up")
    except WaitTimeout as exc:
        raise AssertionError(f"{exc}; last status {last}") from None


@contextmanager
def three_nodes(
    tmp_path: Path,
    chroma: tuple[str, int],
    catalog_backend: str,
    *,
    allowed_root: Path,
    crash_at: str,
    toml: str = "",
    env: dict[str, str] | None = None,
) -> Iterator[list[ServeNode]]:
    """Nodes a, b, c: own homes under ``tmp_path``, one catalog (a SQLite file outside every home, or
    a fresh PostgreSQL database), one Chroma server; node a (the writer) is SIGKILLed at ``crash_at``
    (core/faults.py). Every node is killed and the database dropped on exit."""
    catalog = tmp_path / "shared" / "catalog.sqlite3"
    catalog.parent.mkdir()
    url = postgres.create_database() if catalog_backend == "postgresql" else sqlite_url(catalog)
    tests = Path(__file__).resolve().parents[1]
    base = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GITKB_")},
        "PYTHONPATH": str(tests) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "GITKB_PROMOTE_AFTER_SECONDS": "0.2",
        **(env or {}),
    }
    nodes: list[ServeNode] = []
    try:
        for name in ("a", "b", "c"):
            home = tmp_path / name
            home.mkdir()
            (home / "gitkb.toml").write_text(
                f'[chroma]\nhost = "{chroma[0]}"\nport = {chroma[1]}\n[server]\nallowed_roots = ["{allowed_root}"]\n'
                + toml
            )
            crash = {"GITKB_CRASH_AT": crash_at} if name == "a" else {}
            nodes.append(ServeNode(home, url, {**base, **crash}))
        yield nodes
    finally:
        for n in nodes:
            n.stop(signal.SIGKILL)
        if catalog_backend == "postgresql":
            postgres.drop_database(url)
