"""The MCP server end to end, driven by the SDK's client: in memory, over streamable HTTP and over stdio.

The agent's path: list its knowledge bases → search → read a page of the cited
document → propose an edit → open a pull request (pending review, nothing pushed).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from helpers import SOURCE, Upstream, wait_until

# the git-source fixtures (real repositories, a bare remote)

AGENT = "docs-bot"


def _data(result: Any) -> dict[str, Any]:
    text = result.content[0].text
    if result.is_error:
        raise AssertionError(f"tool failed: {text}")
    try:
        return parse_block(text)  # type: ignore[no-any-return]
    except ValueError:
        return json.loads(text)  # type: ignore[no-any-return]


@pytest.fixture
def agent_ws(source_ws: Any) -> Any:
    assert source_ws.kb_create("handbook-kb", [SOURCE])["Success"]
    assert source_ws.agent_assign(AGENT, ["handbook-kb"])["Success"]
    return source_ws


def test_search_read_propose_open_pull_request(agent_ws: Any, upstream: Upstream) -> None:
    remote_before = upstream.remote_sha("main")

    async def main() -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with Client(build_server(agent_ws, AGENT)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            got["tools"] = names
            kbs = _data(await client.call_tool("list_knowledge_bases", {}))
            got["kbs"] = kbs
            hits = _data(
                await client.call_tool(
                    "search_index", {"query": "rotate API keys payments gateway", "top_n": 3}
                )
            )
            got["hits"] = hits
            top = hits["Results"][0]
            page = _data(
                await client.call_tool(
                    "document_index",
                    {
                        "action": "GET_DOCUMENT",
                        "index_name": top["index_name"],
                        "filepath": top["filepath"],
                        "pagination_mode": "lines",
                        "start": 0,
                        "count": 20,
                    },
                )
            )
            got["page"] = page
            proposal = _data(
                await client.call_tool(
                    "propose_kb_edit",
                    {
                        "source_id_or_index": SOURCE,
                        "relative_path": top["filepath"],
                        "search": "expire every 90 days",
                        "replace": "expire every 60 days",
                        "note": "the gateway's policy changed to 60 days",
                    },
                )
            )
            got["proposal"] = proposal
            got["pr"] = _data(
                await client.call_tool(
                    "open_kb_pull_request",
                    {
                        "source_id_or_index": SOURCE,
                        "title": "Key rotation is every 60 days",
                    },
                )
            )
            again = _data(await client.call_tool("open_kb_pull_request", {"source_id_or_index": SOURCE}))
            got["pr_again"] = again
        return got

    got = anyio.run(main)
    assert {
        "search_index",
        "document_index",
        "propose_kb_edit",
        "open_kb_pull_request",
        "list_knowledge_bases",
    } <= set(got["tools"])
    assert [k["name"] for k in got["kbs"]["KnowledgeBases"]] == ["handbook-kb"]
    top = got["hits"]["Results"][0]
    assert top["id"].startswith("kchk_") and top["index_id"].startswith("kidx_")
    assert top["filepath"] == "docs/runbooks/rotate-api-keys.md"
    assert top["document_title"] == "Rotate API keys"
    assert top["source_uri"].startswith("git+") and top["source_uri"].endswith(
        ":docs/runbooks/rotate-api-keys.md"
    )
    assert top["location"]["line_start"] >= 1 and top["snippet"] and isinstance(top["score"], float)
    assert got["hits"]["ignored"] == []
    assert "expire every 90 days" in got["page"]["Content"].replace("\n", " ")
    assert got["page"]["line_start"] == 1
    prop = got["proposal"]
    assert prop["Success"] and prop["proposal_id"] and prop["branch"] == f"gitkb/proposals/{SOURCE}"
    assert "-they expire" in prop["diff"] or "60 days" in prop["diff"]
    assert upstream.remote_sha(prop["branch"]) is None  # staging pushes nothing
    pr = got["pr"]
    assert pr["review_state"] == "pending" and pr["review_id"]
    assert got["pr_again"]["review_id"] == pr["review_id"]  # still pending: the same review, not a second one
    assert [f["path"] for f in pr["changed_files"]] == ["docs/runbooks/rotate-api-keys.md"]
    assert upstream.remote_sha("main") == remote_before
    assert upstream.remote_sha(prop["branch"]) is None  # nothing reaches the remote before approval


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_url(ws: Any) -> Iterator[str]:
    import uvicorn

    ws.document_index("CREATE_INDEX", index_name="notes")
    ws.document_index("ADD_TEXT", index_name="notes", text="Failover: promote the replica, then repoint DNS.")
    ws.kb_create("ops", ["notes"])
    ws.agent_assign(AGENT, ["ops"], read_only=True)
    port = _free_port()
    app = build_server(ws, AGENT).streamable_http_app(host="127.0.0.1")
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=10, interval=0.02, what="the MCP HTTP server to start")
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_streamable_http_lists_searches_and_refuses_writes_when_read_only(http_url: str) -> None:
    async def main() -> tuple[list[str], dict[str, Any], Any]:
        async with Client(http_url) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            hits = _data(await client.call_tool("search_index", {"query": "promote replica"}))
            refused = await client.call_tool(
                "document_index", {"action": "ADD_TEXT", "index_name": "notes", "text": "x"}
            )
            return names, hits, refused

    names, hits, refused = anyio.run(main)
    assert "search_index" in names
    assert hits["count"] == 1 and hits["Results"][0]["snippet"].startswith("Failover")
    assert (
        refused.is_error and json.loads(refused.content[0].text)["code"] == "forbidden"
    )  # read-only binding


@pytest.mark.slow  # a subprocess: importing the mcp SDK alone takes seconds on a small machine
def test_gitkb_mcp_over_stdio_lists_tools_and_searches(ws: Any, home: Path, catalog_url: str | None) -> None:
    """`gitkb mcp --agent ID` over stdio, as an MCP client configuration would launch it."""
    ws.document_index("CREATE_INDEX", index_name="notes")
    ws.document_index("ADD_TEXT", index_name="notes", text="Backups run nightly at 02:00 UTC.")
    ws.kb_create("ops", ["notes"])
    ws.agent_assign(AGENT, ["ops"])
    exe = str(Path(sys.executable).with_name("gitkb"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITKB_")}
    env.update(GITKB_EMBEDDING_PROVIDER="hashing", GITKB_EMBEDDING_MODEL="hashing-384")
    if catalog_url is not None:  # the workspace's PostgreSQL catalog (the both-backend run)
        env["GITKB_CATALOG_URL"] = catalog_url
    params = StdioServerParameters(command=exe, args=["--home", str(home), "mcp", "--agent", AGENT], env=env)

    async def main() -> tuple[list[str], dict[str, Any]]:
        async with Client(params) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            return names, _data(await client.call_tool("search_index", {"query": "backups nightly"}))

    names, hits = anyio.run(main)
    assert "search_index" in names and hits["count"] == 1
