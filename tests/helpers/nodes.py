"""Workspaces with separate homes sharing one catalog (nodes that share no files), and the slow job
kind the failover tests kill a writer during.

Each node's settings name the shared catalog by URL (``[catalog] url``): a SQLite file outside every
home, or a PostgreSQL database.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from gitkb.core.config import Settings, load_settings

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
