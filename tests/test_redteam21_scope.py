"""Red team, round 21: an agent bound to knowledge base ``ka`` (index ``a``) tries to reach index ``b``
through what changed this round (one tantivy folder per index, narrow catalog reads) and its seams.

Each test tries one attack through the real interface (library, MCP) and asserts that nothing of
``b`` comes back: neither its text, nor its path, nor its index id.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from gitkb.mcp import build_server
from helpers import fails, git, ok

SECRET = "zebrafishcanary"  # only in index b


def _world(make_ws: Any, tmp_path: Path) -> tuple[Any, dict[str, str]]:
    ws = make_ws()
    ids = {n: ok(ws.document_index("CREATE_INDEX", index_name=n))["index_id"] for n in ("a", "b")}
    ok(ws.document_index("ADD_TEXT", index_name="a", text="alpha failover runbook", filepath="a.md"))
    secret = tmp_path / "hr" / "secret"
    secret.mkdir(parents=True)
    (secret / "payroll.md").write_text(f"# Payroll\n\nfailover {SECRET} payroll credentials\n")
    ok(ws.document_index("ADD_DOCUMENTS", index_name="b", filepath=str(secret / "payroll.md")))
    ok(ws.kb_create("ka", ["a"]))
    ok(ws.agent_assign("alice", ["ka"]))
    return ws, ids


def _mcp(ws: Any, agent: str, tool: str, args: dict[str, Any]) -> tuple[bool, str]:
    async def main() -> Any:
        async with Client(build_server(ws, agent)) as client:
            return await client.call_tool(tool, args)

    r = anyio.run(main)
    return bool(r.is_error), r.content[0].text


def _leaks(text: str, ids: dict[str, str]) -> list[str]:
    return [w for w in (SECRET, "payroll", ids["b"]) if w in text]


def test_keyword_folder_of_a_linked_to_b_answers_nothing_of_b(make_ws: Any, tmp_path: Path) -> None:
    """``keywords/<a>/`` made a link to ``keywords/<b>/`` (or b's entries misfiled in a's folder, the
    state verify names keyword_misfiled): a search of a finds b's entries in the folder. Before the
    fix the keyword side took them as a's (it no longer filters by index id) and every search of a
    failed with an internal error naming b's index id (``KeyError: 'kidx_…'``), to the agent too;
    now the catalog's index of each hit is checked, as the semantic side does, and b's are dropped."""
    ws, ids = _world(make_ws, tmp_path)
    home = tmp_path / "ws"  # make_ws's home
    ws.close()
    kw = home / "keywords"
    assert (kw / ids["a"]).is_dir() and (kw / ids["b"]).is_dir()
    shutil.rmtree(kw / ids["a"])
    (kw / ids["a"]).symlink_to(kw / ids["b"])
    ws = make_ws()
    agent = ws.as_agent("alice")
    for mode in ("keyword", "hybrid"):
        out = ok(agent.search_index("failover credentials", mode=mode))
        assert all(r["index_id"] == ids["a"] for r in out["Results"]), out
        assert not _leaks(json.dumps(out), ids), out
        out = ok(ws.document_index("SEARCH", query="failover credentials", index_name="a", mode=mode))
        assert [r["filepath"] for r in out["Results"]] in ([], ["a.md"]), out  # a's own (semantic)
        assert not _leaks(json.dumps(out), ids), out
        is_error, text = _mcp(ws, "alice", "search_index", {"query": "failover credentials", "mode": mode})
        assert not is_error and not _leaks(text, ids), text
    # b searched with a: b's hits are b's, once each
    out = ok(ws.document_index("SEARCH", query=SECRET, indexes=["a", "b"], mode="keyword"))
    assert [r["index_name"] for r in out["Results"]] == ["b"], out


def test_cite_check_of_another_kbs_chunk_reads_like_an_unknown_id(make_ws: Any, tmp_path: Path) -> None:
    """An agent bound to ka asks cite_check about a chunk of b (ids leak through logs, shared
    answers, an operator's paste). Before the fix the check ran first and its own errors came back
    before the scope was looked at: 'chunk kchk_… comes from file:///…/hr/secret/payroll.md, not
    from a git source' told the agent b's file path (and a git chunk's check fetched b's remote);
    now a chunk outside the scope answers exactly what an id never indexed answers."""
    ws, ids = _world(make_ws, tmp_path)
    b_chunk = ok(ws.document_index("SEARCH", query=SECRET, index_name="b"))["Results"][0]["id"]
    unknown = "kchk_" + "0" * 32
    agent = ws.as_agent("alice")
    got = fails(agent.cite_check(b_chunk), "not_found")
    never = fails(agent.cite_check(unknown), "not_found")
    assert got["Error"].replace(b_chunk, "ID") == never["Error"].replace(unknown, "ID"), (got, never)
    assert not _leaks(json.dumps(got), ids), got
    for cid in (b_chunk, unknown):
        is_error, text = _mcp(ws, "alice", "cite_check", {"chunk_id": cid})
        assert is_error and '"not_found"' in text and not _leaks(text, ids), text
    # the operator still gets the check's own answer
    assert fails(ws.cite_check(b_chunk), "invalid_argument")
    # and the agent its own index's
    a_chunk = ok(ws.document_index("SEARCH", query="alpha", index_name="a"))["Results"][0]["id"]
    assert fails(agent.cite_check(a_chunk), "invalid_argument")["Error"].startswith(f"chunk {a_chunk}")


def _two_sources_one_repo(make_ws: Any, tmp_path: Path) -> Any:
    """One repository, two sources: ``pub`` feeds index pub with docs/public/**, ``priv`` feeds
    index priv with docs/private/**; alice may propose to pub's KB only."""
    work = tmp_path / "work"
    (work / "docs" / "public").mkdir(parents=True)
    (work / "docs" / "private").mkdir(parents=True)
    (work / "docs" / "public" / "a.md").write_text("# Public\n\nThe failover runbook for everyone.\n")
    (work / "docs" / "private" / "payroll.md").write_text(
        f"# Payroll\n\nThe {SECRET} salary table: alice 100, bob 200.\n"
    )
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "docs")
    git(tmp_path, "clone", "-q", "--bare", str(work), str(tmp_path / "remote.git"))
    ws = make_ws()
    ok(ws.source_add("pub", str(tmp_path / "remote.git"), include=["public/**"]))
    ok(ws.source_add("priv", str(tmp_path / "remote.git"), include=["private/**"]))
    ok(ws.source_sync("pub"))
    ok(ws.source_sync("priv"))
    ok(ws.kb_create("ka", ["pub"]))
    ok(ws.kb_create("kpriv", ["priv"]))
    ok(ws.agent_assign("alice", ["ka"], mode="propose"))
    return ws


def test_a_proposal_cannot_read_a_file_its_source_does_not_feed(
    make_ws: Any, tmp_path: Path, git_env: None
) -> None:
    """alice may propose to source pub; the repository also holds docs/private/, which only source
    priv feeds (KB kpriv). A proposal's path was checked against the documents root alone, not the
    source's selection: propose_kb_edit('pub', 'private/payroll.md', search=...) staged an edit and
    answered its diff, priv's text with it ('salary table: alice 100, bob 200'), and the exactly-once
    rule answered '0 times' / 'does not exist' for any guess. Now an agent's path that the source
    does not feed is refused before the file is read (edit, create, delete, rename), on the library
    and MCP; the operator, who reads every index, still proposes anywhere under the root."""
    ws = _two_sources_one_repo(make_ws, tmp_path)
    agent = ws.as_agent("alice")
    attempts: list[tuple[str, dict[str, Any]]] = [
        ("propose_kb_edit", {"relative_path": "private/payroll.md", "search": SECRET, "replace": "x"}),
        ("propose_kb_edit", {"relative_path": "private/payroll.md", "search": "bob 300", "replace": "x"}),
        ("propose_kb_edit", {"relative_path": "private/new.md", "content": "# New\n\nplanted\n"}),
        ("propose_kb_delete", {"relative_path": "private/payroll.md"}),
        ("propose_kb_rename", {"relative_path": "private/payroll.md", "new_relative_path": "public/p.md"}),
        ("propose_kb_rename", {"relative_path": "public/a.md", "new_relative_path": "private/a.md"}),
    ]
    for tool, args in attempts:
        out = fails(getattr(agent, tool)("pub", **args), "invalid_argument")
        assert "salary" not in json.dumps(out) and "times" not in out["Error"], (tool, out)
        is_error, text = _mcp(ws, "alice", tool, {"source_id_or_index": "pub", **args})
        assert is_error and "salary" not in text and "invalid_argument" in text, (tool, text)
    assert ok(ws.list_proposals("pub", state="all"))["Proposals"] == []  # nothing staged
    # what pub feeds is still proposable
    staged = ok(agent.propose_kb_edit("pub", "public/a.md", search="everyone", replace="every team"))
    assert staged["path"] == "docs/public/a.md"
    ok(ws.propose_kb_edit("pub", "private/payroll.md", search="bob 200", replace="bob 250"))


def test_crafted_index_refs_never_reach_another_index(make_ws: Any, tmp_path: Path) -> None:
    """Held: refs that look like b (case, spaces, full-width letters, a zero-width space, a path,
    b's kidx_ id in upper case or with a folder part) are each ignored by search_index and refused
    or narrowed away by document_index SEARCH / ASK / LIST_DOCUMENTS; the keyword folders are
    named by catalog index id only, so no ref names a folder."""
    ws, ids = _world(make_ws, tmp_path)
    ok(ws.document_index("CREATE_INDEX", index_name="B"))  # a real index whose name differs by case
    refs = ["b ", " b", "ｂ", "b\u200b", "../b", "a/../b", ids["b"].upper(), ids["b"] + "/", f"./{ids['b']}"]
    agent = ws.as_agent("alice")
    for ref in refs:

        def leaked(answer: dict[str, Any], ref: str = ref) -> list[str]:
            return _leaks(json.dumps(answer).replace(json.dumps(ref)[1:-1], "REF"), ids)

        out = ok(agent.search_index("failover credentials", indexes=[ref], mode="keyword"))
        assert out["Results"] == [] and out["ignored"] == [ref], (ref, out)
        for action, extra in (("SEARCH", {"query": "failover"}), ("ASK", {"query": "failover?"})):
            got = agent.document_index(action, index_name=ref, **extra)
            assert not leaked(got) and got.get("Results", []) == [] and not got.get("Sources"), (ref, got)
        got = agent.document_index("LIST_DOCUMENTS", index_name=ref)
        assert got["Success"] is False and not leaked(got), (ref, got)
    catalog_ids = {d["index_id"] for d in ws.document_index("LIST_INDICES")["IndexDetails"].values()}
    assert {p.name for p in (tmp_path / "ws" / "keywords").iterdir() if p.is_dir()} <= catalog_ids
