"""Citations that stay checkable: a chunk id whose text changed answers `stale` with what its lines say now."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from gitkb.cli.main import cli
from gitkb.core.config import DEFAULT_RETIRED_DAYS, load_settings
from gitkb.core.errors import InvalidArgument
from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from gitkb.services.runtime.retention import prune_retired
from helpers import SOURCE, Upstream, git, wait_until

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


def _agent_cite(ws: Any, chunk_id: str) -> Any:
    async def main() -> Any:
        async with Client(build_server(ws, "docs-bot")) as client:
            return await client.call_tool("cite_check", {"chunk_id": chunk_id})

    return anyio.run(main)


def test_retired_chunks_are_pruned_past_the_retention_and_a_pruned_citation_says_so(
    source_ws: Any, upstream: Upstream, make_ws: Any, make_client: Any, home: Path
) -> None:
    """ops21: ``retired_chunks`` is bounded by ``[catalog] retired_days``: the writer prunes older rows
    when it takes the lease; ``status`` shows the rows and the retention; a citation whose row went
    answers ``not_found`` "no longer known" (library, CLI, MCP; status also over HTTP), never "never indexed" nor a crash."""
    ws = source_ws
    assert ws.kb_create("handbook-kb", [SOURCE])["Success"]
    assert ws.agent_assign("docs-bot", ["handbook-kb"])["Success"]
    cite = cited(ws, "payments gateway expire")
    edit_and_sync(ws, upstream, "expire every 90 days", "expire every 30 days")
    kept = ws.get_index_status()["retired_chunks"]
    assert (
        kept["rows"] >= 1 and kept["retention_days"] == DEFAULT_RETIRED_DAYS and kept["pruned_before"] is None
    )
    assert ws.cite_check(cite["id"])["status"] == "stale"  # within the retention
    now = cited(ws, "payments gateway expire")
    ws.close()
    time.sleep(0.2)  # the rows are older than the retention below

    # A writer with a retention shorter than the rows' age prunes them when it takes the lease.
    short = make_ws(catalog_retired_days=1e-6)  # 0.09 s
    assert short.ctx.is_writer  # (taking the lease may finish on the heartbeat's thread: wait for it)
    wait_until(lambda: short.get_index_status()["retired_chunks"]["rows"] == 0, timeout=10)
    status = short.get_index_status()["retired_chunks"]
    assert status["rows"] == 0 and 1 <= status["pruned"] <= kept["rows"], status
    assert status["retention_days"] == 1e-6 and status["pruned_before"] is not None
    gone = short.cite_check(cite["id"])
    assert gone["Success"] is False and gone["code"] == "not_found", gone
    assert "no longer known" in gone["Error"] and "never indexed here, or" in gone["Error"]
    assert gone["retired_days"] == 1e-6 and gone["retired_pruned_before"] == status["pruned_before"]
    assert short.cite_check(now["id"])["status"] == "current"  # a live chunk is untouched
    never = short.cite_check("kchk_" + "0" * 32)
    assert never["code"] == "not_found" and "no longer known" in never["Error"]  # it cannot tell them apart

    mcp = _agent_cite(short, cite["id"])
    assert mcp.is_error and "no longer known" in mcp.content[0].text, mcp.content[0].text

    (home / "gitkb.toml").write_text(
        '[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n[catalog]\nretired_days = 0.5\n'
    )
    res = CliRunner().invoke(cli, ["--home", str(home), "cite", "check", cite["id"]])
    assert res.exit_code == 1 and "no longer known" in res.output, res.output
    res = CliRunner().invoke(cli, ["--home", str(home), "--json", "status"])
    assert res.exit_code == 0, res.output
    shown = json.loads(res.output)["retired_chunks"]
    assert shown["rows"] == 0 and shown["retention_days"] == 0.5 and shown["pruned"] == status["pruned"]
    res = CliRunner().invoke(cli, ["--home", str(home), "status"])
    assert res.exit_code == 0 and "retired chunks:    0 (kept 0.5 days)" in res.stdout, res.output
    http = make_client()  # the HTTP app over the same home (its gitkb.toml): GET /status
    body = http.get("/status").json()
    assert body["retired_chunks"] == shown, body.get("retired_chunks")


def test_the_prune_keeps_what_is_younger_and_drops_rows_of_live_chunks(ws: Any) -> None:
    """The writer's prune with the default retention keeps a chunk retired a moment ago, and drops the
    rows of chunks a document's change retired that are still live (its unchanged chunks)."""
    assert ws.document_index("CREATE_INDEX", index_name="notes")["Success"]
    paras = [f"Paragraph {i}: step {i} of the replica promotion checks the lag first." for i in range(30)]
    add = {"index_name": "notes", "filepath": "long.md", "chunk_size": 80, "chunk_overlap": 0}
    assert ws.document_index("ADD_TEXT", text="\n\n".join(paras), **add)["Success"]
    page = ws.document_index("GET_DOCUMENT", index_name="notes", filepath="long.md", pagination_mode="chunks")
    hit = ws.document_index("SEARCH", query="step 7 of the replica", index_name="notes", mode="keyword")
    cite = hit["Results"][0]
    assert "step 7 " in str(cite) and page["total"] > 5, (page["total"], cite)
    paras[7] = "Paragraph 7: step 7 of the replica promotion waits for the fence."
    assert ws.document_index("ADD_TEXT", text="\n\n".join(paras), **add)["Success"]
    before = ws.get_index_status()["retired_chunks"]["rows"]
    out = prune_retired(ws.ctx)
    assert out["removed"] == 0 and out["live"] == before - 1 >= 4, (out, before)
    assert ws.get_index_status()["retired_chunks"]["rows"] == 1  # the chunk that changed
    assert ws.cite_check(cite["id"])["status"] == "stale"
    assert prune_retired(ws.ctx) == {"pruned": True, "removed": 0, "live": 0}


@pytest.mark.parametrize("bad", ["0", "-1", '"week"', "true", "40000", "nan"])
def test_a_bad_retired_days_is_refused_at_load(tmp_path: Path, bad: str) -> None:
    home = tmp_path / "h"
    home.mkdir()
    (home / "gitkb.toml").write_text(f"[catalog]\nretired_days = {bad}\n")
    with pytest.raises(InvalidArgument, match=r"\[catalog\] retired_days must be a number of days above 0"):
        load_settings(home)
    res = CliRunner().invoke(cli, ["--home", str(home), "--json", "status"])
    assert res.exit_code == 1 and "retired_days" in res.output
    assert not (home / "catalog.sqlite3").exists()
    with pytest.raises(InvalidArgument, match="GITKB_CATALOG_RETIRED_DAYS must be"):
        load_settings(tmp_path, env={"GITKB_CATALOG_RETIRED_DAYS": bad.strip('"')})
    assert load_settings(tmp_path, env={"GITKB_CATALOG_RETIRED_DAYS": "7"}).catalog_retired_days == 7.0


def test_the_cli_prints_a_stale_citation_of_a_text_document(ws: Any, home: Path) -> None:
    """A chunk of an ADD_TEXT document (no git source) that left the index: ``gitkb cite check`` prints
    the stale answer (it has no branch nor head commit) instead of crashing."""
    assert ws.document_index("CREATE_INDEX", index_name="notes")["Success"]
    add = {"index_name": "notes", "filepath": "n.md"}
    assert ws.document_index("ADD_TEXT", text="# Notes\n\nThe aurora runbook.\n", **add)["Success"]
    hits = ws.document_index("SEARCH", query="aurora", index_name="notes", mode="keyword")["Results"]
    assert ws.document_index("ADD_TEXT", text="# Notes\n\nThe borealis runbook.\n", **add)["Success"]
    assert ws.cite_check(hits[0]["id"])["status"] == "stale"
    (home / "gitkb.toml").write_text('[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n')
    res = CliRunner().invoke(cli, ["--home", str(home), "cite", "check", hits[0]["id"]])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("stale: ") and "n.md" in res.output
