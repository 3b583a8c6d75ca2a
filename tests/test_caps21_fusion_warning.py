"""Searched indexes that set different fusion settings (``fusion``, ``semantic_weight``,
``rrf_k``) are ranked with one value for all of them, the workspace's: the answer says so in
its ``Warnings`` (library, HTTP, MCP), as the keyword side keeps each index's own bm25."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client

from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from helpers import ok


def _mixed(ws: Any) -> None:
    for name, search in (("a", {"fusion": "rrf", "rrf_k": 10}), ("b", {"fusion": "score"})):
        ok(ws.document_index("CREATE_INDEX", index_name=name, settings={"search": search}))
        ok(
            ws.document_index(
                "ADD_TEXT", index_name=name, text=f"{name} failover runbook", filepath=f"{name}.md"
            )
        )


def _mixed_warnings(out: dict[str, Any]) -> list[str]:
    return [w for w in out.get("Warnings") or [] if "set different" in w]


def test_different_fusion_settings_are_named_in_the_warnings(ws: Any, make_client: Any) -> None:
    _mixed(ws)
    both = ok(ws.document_index("SEARCH", query="failover runbook", mode="hybrid"))
    (fusion,) = _mixed_warnings(both)
    assert "fusion (a rrf, b score)" in fusion and "default value score" in fusion, fusion
    # one index, or the keyword mode (no fusion): its own settings, nothing to say
    assert not _mixed_warnings(
        ok(ws.document_index("SEARCH", query="failover", index_name="a", mode="hybrid"))
    )
    assert not _mixed_warnings(ok(ws.document_index("SEARCH", query="failover", mode="keyword")))
    ask = ok(ws.document_index("ASK", query="failover runbook?", mode="hybrid"))
    assert _mixed_warnings(ask) == [fusion], ask
    ok(ws.kb_create("k", ["a", "b"]))
    ok(ws.agent_assign("bot", ["k"]))
    hits = ok(ws.as_agent("bot").search_index("failover runbook", mode="hybrid"))
    assert _mixed_warnings(hits) == [fusion], hits
    # the same fusion, another weight: the weight is named (rrf_k is not used by score fusion)
    ok(
        ws.document_index(
            "SET_SEARCH_SETTINGS", index_name="a", settings={"fusion": "score", "semantic_weight": 0.2}
        )
    )
    (weight,) = _mixed_warnings(ok(ws.document_index("SEARCH", query="failover runbook", mode="hybrid")))
    assert "semantic_weight (a 0.2, b unset)" in weight, weight

    async def mcp_search() -> Any:
        async with Client(build_server(ws)) as client:
            return await client.call_tool(
                "document_index", {"action": "SEARCH", "query": "failover runbook", "mode": "hybrid"}
            )

    r = anyio.run(mcp_search)
    assert not r.is_error and _mixed_warnings(parse_block(r.content[0].text)) == [weight], r.content[0].text
    ws.close()
    r = make_client().post("/search", json={"query": "failover runbook", "mode": "hybrid"})
    assert r.status_code == 200 and _mixed_warnings(r.json()) == [weight], r.text
