"""Red team, round 21: every caller gets exactly what it asked for, on every interface.

An attack here is a parameter that one interface silently widens, narrows or drops.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client

from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from helpers import error_code, fails, ok


def _two_indexes(ws: Any) -> None:
    for name, text in (("a", "alpha failover runbook"), ("b", "beta failover checklist")):
        ok(ws.document_index("CREATE_INDEX", index_name=name))
        ok(ws.document_index("ADD_TEXT", index_name=name, text=text, filepath=f"{name}.md"))


def test_an_empty_index_list_is_refused_not_widened_to_every_index(ws: Any, make_client: Any) -> None:
    """SEARCH / ASK with ``indexes: []`` named no index, and searched every one of them (an agent's
    and ``search_index``'s empty list search nothing): a caller building its list from a filter that
    matched nothing got every index's passages. Now it is invalid_argument on the library, the
    action API and ``POST /search`` / ``/ask``; leaving ``indexes`` out still searches all."""
    _two_indexes(ws)
    for action in ("SEARCH", "ASK"):
        out = fails(ws.document_index(action, query="failover", indexes=[]), "invalid_argument")
        assert "empty" in out["Error"], out
        assert ok(ws.document_index(action, query="failover"))
    assert ok(ws.document_index("SEARCH", query="failover"))["indexes"] == ["a", "b"]
    ws.close()
    client = make_client()
    for route in ("/search", "/ask"):
        r = client.post(route, json={"query": "failover", "indexes": []})
        assert r.status_code == 400 and error_code(r.json()) == "invalid_argument", r.text
    r = client.post("/actions/document_index", json={"action": "SEARCH", "query": "failover", "indexes": []})
    assert r.status_code == 400 and error_code(r.json()) == "invalid_argument", r.text
    r = client.post("/search", json={"query": "failover"})
    assert r.status_code == 200 and r.json()["indexes"] == ["a", "b"], r.text


BOT, READER = "b" * 24, "r" * 24


def test_server_caps_hold_when_the_caller_leaves_the_parameter_out(make_ws: Any, make_client: Any) -> None:
    """``[server] max_top_n = 5`` / ``max_count = 3`` refused a bigger value asked for, and let a
    caller past them by asking nothing: SEARCH answered its default 10, search_index the agent
    binding's default (40 here), LIST_DOCUMENTS its page of 50, GET_DOCUMENT its 20 chunks. Now a
    left-out value is the cap whenever its default lies over it, on every route."""
    ws = make_ws()
    ok(ws.document_index("CREATE_INDEX", index_name="a", chunk_size=8, chunk_overlap=0))
    for i in range(12):
        ok(ws.document_index("ADD_TEXT", index_name="a", text=f"failover note {i}", filepath=f"n{i}.md"))
    long_text = " ".join(f"failover step {i} of the long runbook." for i in range(40))
    doc = ok(ws.document_index("ADD_TEXT", index_name="a", text=long_text, filepath="long.md"))
    ok(ws.kb_create("ka", ["a"]))
    ok(ws.agent_assign("alice", ["ka"], default_top_n=40))
    ws.close()
    toml = (
        "[server]\nmax_top_n = 5\nmax_count = 3\n"
        f'[[server.tokens]]\nname = "bot"\ntoken = "{BOT}"\nscopes = ["read"]\nagent = "alice"\n'
        f'[[server.tokens]]\nname = "reader"\ntoken = "{READER}"\nscopes = ["read"]\n'
    )
    client = make_client(toml)
    bot = {"Authorization": f"Bearer {BOT}"}
    reader = {"Authorization": f"Bearer {READER}"}
    q = {"query": "failover", "mode": "keyword"}
    for route, body in (
        ("/search", q),
        ("/search_index", q),
        ("/actions/document_index", {"action": "SEARCH", **q}),
    ):
        r = client.post(route, json=body, headers=bot)
        assert r.status_code == 200 and 0 < r.json()["count"] <= 5, (route, r.text)
    r = client.post("/search", json=q, headers=reader)  # a token of no agent too
    assert r.status_code == 200 and r.json()["count"] == 5, r.text
    r = client.post("/search_index", json={**q, "top_n": 2}, headers=bot)  # asked for: as asked
    assert r.json()["count"] == 2, r.text
    r = client.get("/indexes/a/documents", headers=reader)
    assert r.status_code == 200 and len(r.json()["Documents"]) == 3, r.text
    r = client.get(f"/indexes/a/documents/{doc['file_id']}", headers=reader)
    assert r.status_code == 200 and len(r.json()["Chunks"]) == 3, r.text


def test_a_tier_filter_finds_its_documents_past_a_crowd_of_other_tiers(ws: Any, tmp_path: Any) -> None:
    """``tiers: ["cold"]``, ``top_n: 3``, with 3 cold documents about failover ranked under 300 hot
    ones (a word longer, farther from the query): tiers are filtered after the fact, from a fetch of limit * 10 + 50
    keyword hits (limit * 5 + 50 neighbours), so the keyword search answered 0 results and the
    semantic one 0, with no warning, while 3 existed (hybrid's deeper lists found them). Now a side
    whose fetched hits run out before top_n count fetches more while the index has more."""
    hot, cold = tmp_path / "hot", tmp_path / "cold"
    hot.mkdir()
    cold.mkdir()
    for i in range(300):
        (hot / f"h{i}.md").write_text(f"failover failover failover drill {i}\n")
    for i in range(3):
        (cold / f"c{i}.md").write_text(f"failover failover failover drill archived {i}\n")
    ok(ws.document_index("CREATE_INDEX", index_name="a"))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="a", filepath=str(hot)))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="a", filepath=str(cold), tier="cold"))
    ok(ws.build_embeddings())
    for mode in ("keyword", "semantic", "hybrid"):
        out = ok(
            ws.document_index("SEARCH", query="failover", index_name="a", tiers=["cold"], top_n=3, mode=mode)
        )
        assert sorted(r["filepath"] for r in out["Results"]) == [f"cold/c{i}.md" for i in range(3)], (
            mode,
            out,
        )
    ok(ws.kb_create("ka", ["a"]))
    ok(ws.agent_assign("alice", ["ka"]))
    out = ok(ws.as_agent("alice").search_index("failover", tiers=["cold"], top_n=3, mode="keyword"))
    assert out["count"] == 3, out


def test_an_agent_gets_its_bindings_top_n_on_every_search_tool(make_ws: Any, make_client: Any) -> None:
    """An agent bound with ``default_top_n = 3`` got 3 hits from search_index, which refuses
    top_n over 50, and 10 from ``document_index`` SEARCH left without top_n (up to 100 when asked):
    the same agent, the same search, another tool, more passages. Now document_index SEARCH and ASK
    take the binding's default and refuse over 50, as search_index does, on the library, MCP and
    an agent token over HTTP (with a server cap above the default too)."""
    ws = make_ws()
    ok(ws.document_index("CREATE_INDEX", index_name="a"))
    for i in range(60):
        ok(ws.document_index("ADD_TEXT", index_name="a", text=f"failover note {i}", filepath=f"n{i}.md"))
    ok(ws.kb_create("ka", ["a"]))
    ok(ws.agent_assign("alice", ["ka"], default_top_n=3))
    agent = ws.as_agent("alice")
    assert ok(agent.search_index("failover", mode="keyword"))["count"] == 3
    assert ok(agent.document_index("SEARCH", query="failover", mode="keyword"))["count"] == 3
    assert len(ok(agent.document_index("ASK", query="failover note?", mode="keyword"))["Sources"]) <= 3
    assert ok(agent.document_index("SEARCH", query="failover", mode="keyword", top_n=7))["count"] == 7
    fails(agent.document_index("SEARCH", query="failover", mode="keyword", top_n=60), "invalid_argument")
    fails(agent.search_index("failover", mode="keyword", top_n=60), "invalid_argument")
    assert ok(ws.document_index("SEARCH", query="failover", mode="keyword"))["count"] == 10  # the operator's

    async def mcp_search() -> Any:
        async with Client(build_server(ws, "alice")) as client:
            return await client.call_tool(
                "document_index", {"action": "SEARCH", "query": "failover", "mode": "keyword"}
            )

    r = anyio.run(mcp_search)
    assert not r.is_error and len(parse_block(r.content[0].text)["Results"]) == 3, r.content[0].text
    ws.close()
    toml = (
        "[server]\nmax_top_n = 5\n"
        f'[[server.tokens]]\nname = "bot"\ntoken = "{BOT}"\nscopes = ["read"]\nagent = "alice"\n'
    )
    client = make_client(toml)
    bot = {"Authorization": f"Bearer {BOT}"}
    for route, body in (
        ("/search", {"query": "failover", "mode": "keyword"}),
        ("/search_index", {"query": "failover", "mode": "keyword"}),
        ("/actions/document_index", {"action": "SEARCH", "query": "failover", "mode": "keyword"}),
    ):
        r = client.post(route, json=body, headers=bot)
        assert r.status_code == 200 and r.json()["count"] == 3, (route, r.text)


def test_upper_case_operator_words_are_searched_as_words(ws: Any, make_client: Any) -> None:
    """The keyword side promises free text, never query syntax, and kept the query's words as
    given: tantivy's parser read AND / OR / NOT in upper case as operators. 'failover AND checklist'
    answered nothing where 'failover and checklist' answered both documents, and 'NOT failover'
    answered the two documents *without* the word (one of them holding no word of the query at all).
    Now those words are searched as words, on every mode and interface (the store's query)."""
    ok(ws.document_index("CREATE_INDEX", index_name="a"))
    ok(ws.document_index("ADD_TEXT", index_name="a", text="failover runbook steps", filepath="f.md"))
    ok(ws.document_index("ADD_TEXT", index_name="a", text="release checklist items", filepath="c.md"))
    ok(ws.document_index("ADD_TEXT", index_name="a", text="the gate of the castle", filepath="g.md"))

    def paths(query: str) -> list[str]:
        out = ok(ws.document_index("SEARCH", query=query, index_name="a", mode="keyword"))
        return sorted(r["filepath"] for r in out["Results"])

    assert paths("failover AND checklist") == paths("failover and checklist") == ["c.md", "f.md"]
    assert paths("failover NOT checklist") == ["c.md", "f.md"]
    assert paths("NOT failover") == ["f.md"]
    assert paths("failover OR release") == ["c.md", "f.md"]
    ws.close()
    client = make_client()
    r = client.post("/search", json={"query": "NOT failover", "index_name": "a", "mode": "keyword"})
    assert [h["filepath"] for h in r.json()["Results"]] == ["f.md"], r.text


def test_a_tenant_cannot_be_the_keyword_indexs_mark_of_no_tenant(ws: Any) -> None:
    """Tenants isolate (a search with tenant sees that tenant's documents, one without only the
    untenanted). The keyword index files an untenanted chunk under the tenant "\\x00none", and a
    tenant of that very name was taken: its document was found by every keyword search without
    tenant, and a search with that tenant found every untenanted document (the semantic side,
    which checks the catalog, did neither). Now a tenant with control characters is refused, when
    documents are added and when searching; spaces around a searched tenant go, as when adding."""
    ok(ws.document_index("CREATE_INDEX", index_name="a"))
    ok(ws.document_index("ADD_TEXT", index_name="a", text="failover plain note", filepath="plain.md"))
    mark = "\x00none"
    fails(
        ws.document_index(
            "ADD_TEXT", index_name="a", text="failover acme secret", filepath="t.md", tenant=mark
        ),
        "invalid_argument",
    )
    for action in ("SEARCH", "ASK"):
        fails(ws.document_index(action, query="failover", index_name="a", tenant=mark), "invalid_argument")
    got = ok(ws.document_index("SEARCH", query="failover", index_name="a", mode="keyword"))
    assert [r["filepath"] for r in got["Results"]] == ["plain.md"], got
    ok(
        ws.document_index(
            "ADD_TEXT", index_name="a", text="failover acme note", filepath="acme.md", tenant=" acme "
        )
    )
    got = ok(ws.document_index("SEARCH", query="failover", index_name="a", mode="keyword", tenant=" acme "))
    assert [r["filepath"] for r in got["Results"]] == ["acme.md"], got


def test_an_index_keeps_its_own_bm25_when_searched_with_another(ws: Any) -> None:
    """Each index has its own keyword index now, and its own search settings: index a sets
    bm25_k1 0.3 / bm25_b 0.2. Searched alone its hits scored with them; searched with b (default
    settings), the two differed, so both were scored with the workspace's default and a's scores
    (and with them the merge, the fusion and the order) changed for no reason a's caller gave. Now
    each index's hits are scored with its own (k1, b), searched alone or with others."""
    ok(
        ws.document_index(
            "CREATE_INDEX", index_name="a", settings={"search": {"bm25_k1": 0.3, "bm25_b": 0.2}}
        )
    )
    ok(ws.document_index("CREATE_INDEX", index_name="b"))
    for i in range(5):
        text = "failover " * (i + 1) + f"words padding here {i} " * (5 - i)
        ok(ws.document_index("ADD_TEXT", index_name="a", text=text, filepath=f"a{i}.md"))
        ok(ws.document_index("ADD_TEXT", index_name="b", text=f"failover other {i}", filepath=f"b{i}.md"))

    def scores(**where: Any) -> dict[str, float]:
        res = ok(ws.document_index("SEARCH", query="failover", mode="keyword", top_n=20, **where))
        return {r["filepath"]: r["score"] for r in res["Results"] if r["index_name"] == "a"}

    alone = scores(index_name="a")
    assert len(alone) == 5
    assert scores(indexes=["a", "b"]) == alone
    assert scores() == alone  # every index
