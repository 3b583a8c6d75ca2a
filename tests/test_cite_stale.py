"""Citations that stay checkable: a chunk id whose text changed answers `stale` with what its lines say now."""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import Client

from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from helpers import SOURCE, Upstream, git

PATH = "docs/runbooks/rotate-api-keys.md"


def cited(ws: Any, query: str) -> dict[str, Any]:
    hits = ws.document_index("SEARCH", query=query, index_name=SOURCE, mode="keyword")["Results"]
    assert hits and hits[0]["filepath"] == PATH, hits
    return dict(hits[0])


def edit_and_sync(ws: Any, upstream: Upstream, old: str, new: str) -> str:
    text = (upstream.work / PATH).read_text()
    assert old in text
    upstream.write(PATH, text.replace(old, new, 1))
    sha = upstream.commit_push(f"{old} -> {new}")
    assert ws.source_sync(SOURCE)["Success"]
    return sha


def test_a_changed_citation_answers_stale_with_the_lines_now(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    cite = cited(ws, "payments gateway expire")
    before = ws.cite_check(cite["id"])
    assert before["status"] == "current"
    head = edit_and_sync(ws, upstream, "expire every 90 days", "expire every 30 days")
    out = ws.cite_check(cite["id"])
    assert out["Success"] and out["status"] == "stale", out
    assert (
        out["source_uri"] == cite["source_uri"] and out["commit"] == before["commit"]
    )  # its last source_uri
    assert (out["line_start"], out["line_end"]) == (before["line_start"], before["line_end"])
    assert out["head_commit"] == head and out["passage"] == "changed"
    assert "every 30 days" in out["head_text"] and "every 90 days" not in out["head_text"]
    now = cited(ws, "payments gateway expire")
    assert out["current_chunk_id"] == now["id"] != cite["id"]
    assert ws.cite_check(now["id"])["status"] == "current"
    assert "stale" in out["Message"] and now["id"] in out["Message"]
    # the file removed: both ids answer stale, the file is gone
    git(upstream.work, "rm", "-q", PATH)
    upstream.commit_push("remove the runbook")
    assert ws.source_sync(SOURCE)["Success"]
    for cid in (cite["id"], now["id"]):
        gone = ws.cite_check(cid)
        assert (
            gone["status"] == "stale" and gone["passage"] == "file_gone" and gone["current_chunk_id"] is None
        )
    never = ws.cite_check("kchk_" + "0" * 32)
    assert never["code"] == "not_found" and "never indexed" in never["Error"]


def test_stale_over_mcp_for_an_agent(source_ws: Any, upstream: Upstream) -> None:
    ws = source_ws
    assert ws.kb_create("handbook-kb", [SOURCE])["Success"]
    assert ws.agent_assign("docs-bot", ["handbook-kb"])["Success"]
    cite = cited(ws, "payments gateway expire")
    edit_and_sync(ws, upstream, "expire every 90 days", "expire every 30 days")

    async def main() -> Any:
        async with Client(build_server(ws, "docs-bot")) as client:
            return await client.call_tool("cite_check", {"chunk_id": cite["id"]})

    result = anyio.run(main)
    assert not result.is_error, result.content[0].text
    text = result.content[0].text
    try:
        data = parse_block(text)
    except ValueError:
        data = json.loads(text)
    assert data["status"] == "stale" and "every 30 days" in data["head_text"] and data["current_chunk_id"]
