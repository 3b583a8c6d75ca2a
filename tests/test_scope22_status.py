"""scope22: an agent's status counts only its own indexes.

get_index_status kept, for an agent, the workspace-wide queue_depth, in_flight, dirty_paths,
dirty_embeddings, status and caught_up: an agent bound to index ``a`` saw the queue grow and the
status turn ``building`` when someone ingested into ``b`` (a side channel, and a number not true of
what it can search). Now each is counted over its indexes (services/operations/scoped_status.py);
the operator's answer is the workspace's, as before. Checked through the library, an agent's HTTP
token and the MCP server of ``gitkb mcp --agent``, on SQLite and PostgreSQL.

The work is held where it is: the writer thread runs an ADD_DOCUMENTS into one index and stops at
the pause point ``ingest.after_write`` (its rows and change-log entries are committed, the
keyword index has not taken them: a dirty path), and an ADD_TEXT into the same index waits in
the queue behind it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from gitkb.services.dispatch.scope import AGENT_FAILED
from helpers import ok, wait_until

BOT = "s" * 24
TOML = f'[[server.tokens]]\nname = "bot"\ntoken = "{BOT}"\nscopes = ["read"]\nagent = "alice"\n'
POINT = "ingest.after_write"
BACKENDS = pytest.mark.parametrize("catalog_backend", ["sqlite", "postgresql"], indirect=True)
HOW = pytest.mark.parametrize("how", ["library", "http", "mcp"])
CAUGHT_UP = {
    "status": "queryable",
    "error": None,
    "queue_depth": 0,
    "in_flight": None,
    "dirty_paths": 0,
    "dirty_embeddings": 0,
    "caught_up": True,
    "Message": "caught up",
}


def _world(c: TestClient) -> Any:
    ws = c.app.state.gitkb.workspace  # type: ignore[attr-defined]
    for name in ("a", "b"):
        ok(ws.document_index("CREATE_INDEX", index_name=name))
        ok(ws.document_index("ADD_TEXT", index_name=name, text=f"{name} runbook", filepath=f"{name}.md"))
    ok(ws.kb_create("ka", ["a"]))
    ok(ws.agent_assign("alice", ["ka"]))
    ok(ws.build_embeddings())
    wait_until(lambda: ok(ws.get_index_status())["caught_up"], timeout=60, what="the workspace caught up")
    return ws


def _status(
    c: TestClient | None, ws: Any, how: str, agent: str = "alice", tool: str = "get_index_status"
) -> dict[str, Any]:
    if how == "library":
        return ok(getattr(ws.as_agent(agent), tool)())
    if how == "mcp":

        async def main() -> Any:
            async with Client(build_server(ws, agent)) as client:
                return await client.call_tool(tool, {})

        r = anyio.run(main)
        assert not r.is_error, r.content[0].text
        text = r.content[0].text
        return dict(parse_block(text) if text.startswith("<<<") else json.loads(text))
    assert c is not None and agent == "alice"  # the token's agent
    r = c.get(
        "/status" if tool == "get_index_status" else "/embeddings", headers={"Authorization": f"Bearer {BOT}"}
    )
    assert r.status_code == 200, r.text
    return dict(r.json())


@contextmanager
def _held(ws: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index: str) -> Iterator[None]:
    """An ADD_DOCUMENTS into ``index`` running (stopped after its catalog write) and an ADD_TEXT
    into it queued behind; both finish when the block ends."""
    where, docs = tmp_path / "pause", tmp_path / "docs"
    where.mkdir()
    docs.mkdir()
    (docs / "held.md").write_text("# Held\n\npayroll of the held ingest\n")
    monkeypatch.setenv("GITKB_PAUSE_AT", POINT)
    monkeypatch.setenv("GITKB_PAUSE_DIR", str(where))
    jobs = [
        ws.promoted("document_index", action="ADD_DOCUMENTS", index_name=index, filepath=str(docs), wait=0)
    ]
    try:
        wait_until(lambda: (where / f"{POINT}.reached").exists(), timeout=60, what="the held ingest")
        jobs.append(ws.promoted("document_index", action="ADD_TEXT", index_name=index, text="queued", wait=0))
        assert all(j.get("status") == "working" for j in jobs), jobs
        yield
    finally:
        (where / f"{POINT}.go").write_text("")
        for j in jobs:
            if j.get("job_id"):
                ok(ws.wait_job(j["job_id"], timeout=60))


@BACKENDS
@HOW
def test_work_on_another_index_is_not_in_an_agents_status(
    make_client: Callable[..., TestClient], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    c = make_client(TOML)
    ws = _world(c)
    with _held(ws, tmp_path, monkeypatch, "b"):
        operator = ok(ws.get_index_status())
        agent = _status(c, ws, how)
    # the operator's answer is the workspace's: b's work shows
    assert operator["queue_depth"] == 1 and operator["in_flight"] == "action", operator
    assert operator["dirty_paths"] >= 1 and operator["status"] == "building", operator
    assert operator["caught_up"] is False, operator
    # the agent bound to a sees a's: nothing queued, running or dirty
    assert {k: agent[k] for k in CAUGHT_UP} == CAUGHT_UP, agent


@BACKENDS
@HOW
def test_work_on_its_own_index_is_in_an_agents_status(
    make_client: Callable[..., TestClient], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    c = make_client(TOML)
    ws = _world(c)
    with _held(ws, tmp_path, monkeypatch, "a"):
        operator = ok(ws.get_index_status())
        agent = _status(c, ws, how)
    for out in (operator, agent):
        assert out["queue_depth"] == 1 and out["in_flight"] == "action", out
        assert out["dirty_paths"] >= 1 and out["status"] == "building", out
        assert out["caught_up"] is False, out
    assert agent["Message"].startswith("building; queue 1, in flight action"), agent
    assert agent["dirty_paths"] == operator["dirty_paths"], (agent, operator)


@BACKENDS
@HOW
def test_vectors_waiting_in_another_index_are_not_in_an_agents_status(
    make_client: Callable[..., TestClient], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The background embedder stopped after upserting b's new chunk, before its watermark moves:
    b's chunk still waits for its vector and the build is in flight, for the operator only."""
    c = make_client(TOML)
    ws = _world(c)
    where = tmp_path / "pause"
    where.mkdir()
    point = "vectors.after_upsert"
    monkeypatch.setenv("GITKB_PAUSE_AT", point)
    monkeypatch.setenv("GITKB_PAUSE_DIR", str(where))
    try:
        ok(ws.document_index("ADD_TEXT", index_name="b", text="b payroll, new", filepath="b2.md"))
        wait_until(lambda: (where / f"{point}.reached").exists(), timeout=60, what="the held vectors")
        operator = ok(ws.get_index_status())
        agent = _status(c, ws, how)
    finally:
        (where / f"{point}.go").write_text("")
    assert operator["dirty_embeddings"] >= 1 and operator["in_flight"] == "build_embeddings", operator
    assert operator["caught_up"] is False, operator
    assert {k: agent[k] for k in CAUGHT_UP} == CAUGHT_UP, agent
    wait_until(lambda: ok(ws.get_index_status())["caught_up"], timeout=60, what="b's vectors")


@BACKENDS
@HOW
def test_an_agents_embeddings_status_counts_only_its_own_indexes(
    make_client: Callable[..., TestClient], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """embeddings_status had the same side channel: its chunk_count, pending_embeddings and Message
    counted every index, and the embedder's busy flag, its last runs and the Chroma collections
    (names and counts) were every index's. While b's new chunk waits for its vector, the agent
    bound to a sees a's one chunk and nothing waiting, and none of those views."""
    c = make_client(TOML)
    ws = _world(c)
    where = tmp_path / "pause"
    where.mkdir()
    point = "vectors.after_upsert"
    monkeypatch.setenv("GITKB_PAUSE_AT", point)
    monkeypatch.setenv("GITKB_PAUSE_DIR", str(where))
    try:
        ok(ws.document_index("ADD_TEXT", index_name="b", text="b payroll, new", filepath="b2.md"))
        wait_until(lambda: (where / f"{point}.reached").exists(), timeout=60, what="the held vectors")
        operator = ok(ws.embeddings_status())
        agent = _status(c, ws, how, tool="embeddings_status")
    finally:
        (where / f"{point}.go").write_text("")
    assert operator["chunk_count"] == 3 and operator["pending_embeddings"] >= 1, operator
    assert operator["worker"]["busy"] is True and operator["collections"], operator
    assert agent["chunk_count"] == 1 and agent["pending_embeddings"] == 0, agent
    assert agent["Message"] == "hashing/hashing-384: 1 chunk(s), 0 waiting for vectors", agent
    assert not {"worker", "last_runs", "collections", "path"} & set(agent), agent
    assert set(agent["indexes"]) == {"a"}, agent
    wait_until(lambda: ok(ws.get_index_status())["caught_up"], timeout=60, what="b's vectors")


@pytest.mark.parametrize("how", ["library", "mcp"])
def test_a_failed_build_of_another_index_is_not_an_agents_failure(
    source_ws: Any, upstream: Any, how: str
) -> None:
    """A sync of the source feeding ``handbook`` fails (its remote is gone): the operator's status is
    ``failed`` with git's error (a server path); an agent bound to ``a`` only is queryable and caught
    up, with no error, and an agent bound to ``handbook`` sees the failure, its own index's."""
    ws = source_ws
    ok(ws.document_index("CREATE_INDEX", index_name="a"))
    ok(ws.document_index("ADD_TEXT", index_name="a", text="a runbook", filepath="a.md"))
    ok(ws.kb_create("ka", ["a"]))
    ok(ws.kb_create("kh", ["handbook"]))
    ok(ws.agent_assign("alice", ["ka"]))
    ok(ws.agent_assign("hank", ["kh"]))
    ok(ws.build_embeddings())
    wait_until(lambda: ok(ws.get_index_status())["caught_up"], timeout=60, what="the workspace caught up")
    upstream.remote.rename(upstream.remote.with_name("remote.gone"))
    assert ws.source_sync("handbook")["Success"] is False
    operator = ok(ws.get_index_status())
    assert operator["status"] == "failed" and str(upstream.remote) in operator["error"], operator
    alice = _status(None, ws, how, "alice")
    assert {k: alice[k] for k in CAUGHT_UP} == CAUGHT_UP, alice
    hank = _status(None, ws, how, "hank")
    assert hank["status"] == "failed" and hank["error"] == AGENT_FAILED, hank  # not git's text:
    assert str(upstream.remote.parent) not in json.dumps(hank), hank  # it names the server's paths
    assert hank["caught_up"] is False and hank["Message"].startswith("failed; queue 0"), hank


def test_a_sync_counts_for_the_indexes_its_source_feeds_and_a_reindex_of_all_for_every_index(
    source_ws: Any, upstream: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind b's held ingest: a sync of ``handbook`` (the source feeding index ``handbook``) and a
    reindex of every index wait. The agent bound to ``handbook`` counts both, the one bound to ``a``
    the reindex only (it rebuilds ``a`` too), the operator all of them."""
    ws = source_ws
    for name in ("a", "b"):
        ok(ws.document_index("CREATE_INDEX", index_name=name))
        ok(ws.document_index("ADD_TEXT", index_name=name, text=f"{name} runbook", filepath=f"{name}.md"))
    ok(ws.kb_create("ka", ["a"]))
    ok(ws.kb_create("kh", ["handbook"]))
    ok(ws.agent_assign("alice", ["ka"]))
    ok(ws.agent_assign("hank", ["kh"]))
    upstream.write("docs/new.md", "# New\n\na new page\n")
    upstream.commit_push("a new page")
    with _held(ws, tmp_path, monkeypatch, "b"):
        sync = ws.promoted("source_sync", source="handbook", wait=0)
        everything = ws.promoted("reindex", wait=0)
        assert sync.get("status") == everything.get("status") == "working", (sync, everything)
        operator = ok(ws.get_index_status())
        alice = ok(ws.as_agent("alice").get_index_status())
        hank = ok(ws.as_agent("hank").get_index_status())
    assert operator["queue_depth"] == 3 and operator["in_flight"] == "action", operator
    assert alice["queue_depth"] == 1 and alice["in_flight"] is None and alice["dirty_paths"] == 0, alice
    assert hank["queue_depth"] == 2 and hank["in_flight"] is None and hank["dirty_paths"] == 0, hank
    assert alice["caught_up"] is hank["caught_up"] is False, (alice, hank)
    for job in (sync, everything):
        ok(ws.wait_job(job["job_id"], timeout=60))
