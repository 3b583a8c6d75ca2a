"""prleak21: the other answers that list staged proposals or reviews, as an agent.

list_proposals, show_proposal, discard_proposal, list_reviews and show_review are not offered to
agents (the action table's ``agents`` flag; the policy refuses them whatever the interface): MCP
does not list them and refuses a call, an agent token over HTTP gets 403, the library forbidden. The
agent's other tools that list things (status, knowledge bases, indexes, documents, search) carry
neither the hidden proposal nor the payroll text. An agent learns a review's state by asking for it
again (open_kb_pull_request returns the same review, cut: test_prleak21_review_view).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from fastapi.testclient import TestClient
from mcp import Client

from gitkb.mcp import build_server
from helpers import error_code, ok
from test_gate21_refresh import BOT, SECRET, TOML, _world

HIDDEN_ACTIONS = ("list_proposals", "show_proposal", "discard_proposal", "list_reviews", "show_review")


def test_no_agent_interface_lists_staged_proposals_or_reviews(
    make_client: Callable[..., TestClient], tmp_path: Path, git_env: None
) -> None:
    c = make_client(TOML)
    ws, ids = _world(c, tmp_path)
    review = ok(ws.open_kb_pull_request("pub"))["review_id"]
    hidden = ids["operator_private"]
    agent = ws.as_agent("alice")
    for name, args in (
        ("list_proposals", {"source": "pub"}),
        ("show_proposal", {"proposal_id": hidden}),
        ("discard_proposal", {"proposal_id": hidden}),
        ("list_reviews", {}),
        ("show_review", {"review_id": review}),
    ):
        r = getattr(agent, name)(**args)
        assert error_code(r) == "forbidden" and SECRET not in json.dumps(r), (name, r)
    auth = {"Authorization": f"Bearer {BOT}"}
    for method, path in (
        ("GET", "/proposals?source=pub"),
        ("GET", f"/proposals/{hidden}"),
        ("DELETE", f"/proposals/{hidden}"),
        ("GET", "/reviews"),
        ("GET", f"/reviews/{review}"),
    ):
        r = c.request(method, path, headers=auth)
        assert r.status_code == 403 and hidden not in r.text and "payroll" not in r.text, (path, r.text)

    async def main() -> tuple[set[str], list[Any], list[str]]:
        async with Client(build_server(ws, "alice")) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            refused = [await client.call_tool(n, {}) for n in HIDDEN_ACTIONS]
            texts = []
            for name, args in (
                ("get_index_status", {}),
                ("embeddings_status", {}),
                ("list_knowledge_bases", {}),
                ("document_index", {"action": "LIST_INDICES"}),
                ("document_index", {"action": "GET_INDICES_STATS"}),
                ("document_index", {"action": "LIST_DOCUMENTS", "index_name": "pub"}),
                ("search_index", {"query": "salary table bob"}),
            ):
                r = await client.call_tool(name, args)
                assert not r.is_error, (name, r.content)
                texts.append(name + ": " + "".join(getattr(x, "text", "") for x in r.content))
            return names, refused, texts

    names, refused, texts = anyio.run(main)
    assert not names & set(HIDDEN_ACTIONS), names
    assert all(r.is_error for r in refused), refused
    assert "public/a.md" in texts[5], texts[5]  # the listing answered, with what alice may read
    for text in texts:
        assert SECRET not in text and hidden not in text and review not in text, text
