"""SEARCH keeps ``top_n`` results when a hit is deleted between its two catalog reads.

A hit is checked live (``live_chunks``), fused, then read in full (``cited_chunks``); a document
deleted in between used to cost the caller a result although deeper live candidates had been
fetched. Here the search stops at the pause point ``search.full_rows`` (``core/faults``), the
writer deletes the document of its best hit, and the search goes on: library, CLI (another
process), HTTP and MCP, keyword and hybrid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from helpers import ok, wait_until

REPO = Path(__file__).resolve().parents[1]
QUERY = "password rotation"
TOP_N = 5
AGENT = "docs-bot"


def fill(w: Any) -> None:
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    for i in range(12):
        words = " ".join(["password rotation"] * (12 - i))  # note 0 ranks first, then 1, ...
        text = f"Note {i}: {words} for the database, step {i}.\n"
        ok(w.document_index("ADD_TEXT", index_name="kb", text=text, filepath=f"n{i:02d}.md"))
    ok(w.build_embeddings())


def search(w: Any, mode: str) -> dict[str, Any]:
    return ok(w.document_index("SEARCH", query=QUERY, index_name="kb", mode=mode, top_n=TOP_N))


def paused(
    w: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: Callable[[], Any], victim: str, mode: str
) -> Any:
    """Run ``call`` (a search) until its hits are checked live and not yet read in full (hybrid:
    both sides), delete ``victim`` through the writer, let the search go on; its answer."""
    where = tmp_path / "pause"
    where.mkdir()
    points = {
        "keyword": ["search.full_rows"],
        "hybrid": ["search.full_rows", "search.semantic_checked"],  # the keyword side's thread, this one's
        "semantic": ["search.semantic_checked"],
    }[mode]
    monkeypatch.setenv("GITKB_PAUSE_AT", ",".join(points))
    monkeypatch.setenv("GITKB_PAUSE_DIR", str(where))
    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.update(answer=call()))
    t.start()
    try:
        wait_until(
            lambda: all((where / f"{p}.reached").exists() for p in points), timeout=60, what="the pauses"
        )
        monkeypatch.delenv("GITKB_PAUSE_AT")  # the writer's own reads go on
        ok(w.document_index("DELETE_DOCUMENT", index_name="kb", filepath=victim))
    finally:
        for p in points:
            (where / f"{p}.go").write_text("")
        t.join(90)
    return out["answer"]


def check(answer: dict[str, Any], before: list[str], victim: str) -> None:
    got = [r["filepath"] for r in answer["Results"]]
    assert victim not in got
    assert len(got) == TOP_N, got  # was TOP_N - 1: the deleted hit was dropped, nothing took its place
    assert answer["count"] == TOP_N, answer
    assert answer.get("Message", f"{TOP_N} result(s)").startswith(f"{TOP_N} result(s)"), (
        answer
    )  # MCP's page: none
    assert set(before[1:]) <= set(got), (before, got)


@pytest.mark.parametrize("mode", ["keyword", "hybrid", "semantic"])
def test_library(
    make_ws: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    w = make_ws()
    fill(w)
    before = [r["filepath"] for r in search(w, mode)["Results"]]
    assert len(before) == TOP_N
    answer = paused(w, tmp_path, monkeypatch, lambda: search(w, mode), before[0], mode)
    check(ok(answer), before, before[0])
    assert [r["filepath"] for r in search(w, mode)["Results"]] == [r["filepath"] for r in answer["Results"]]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_http(
    make_client: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    client = make_client()
    w = client.app.state.gitkb.workspace
    fill(w)
    before = [r["filepath"] for r in search(w, mode)["Results"]]
    body = {"query": QUERY, "indexes": ["kb"], "mode": mode, "top_n": TOP_N}
    resp = paused(w, tmp_path, monkeypatch, lambda: client.post("/search", json=body), before[0], mode)
    assert resp.status_code == 200, resp.text
    check(resp.json(), before, before[0])


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_cli_in_another_process(
    make_ws: Callable[..., Any], home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    w = make_ws()
    fill(w)
    (home / "gitkb.toml").write_text('[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n')
    before = [r["filepath"] for r in search(w, mode)["Results"]]
    args = ["--home", str(home), "--json", "search", QUERY, "--index", "kb", "--top-n", str(TOP_N)]

    def cli() -> subprocess.CompletedProcess[str]:
        code = "import sys; from gitkb.cli.main import main; sys.argv[0] = 'gitkb'; main()"
        return subprocess.run(
            [sys.executable, "-c", code, *args, "--mode", mode],
            env=dict(os.environ),  # the pause points too
            capture_output=True,
            text=True,
            timeout=90,
            cwd=REPO,
        )

    proc = paused(w, tmp_path, monkeypatch, cli, before[0], mode)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    check(json.loads(proc.stdout), before, before[0])


def test_mcp_search_index(
    make_ws: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = make_ws()
    fill(w)
    ok(w.kb_create("handbook", ["kb"]))
    ok(w.agent_assign(AGENT, ["handbook"]))
    before = [r["filepath"] for r in search(w, "hybrid")["Results"]]

    def call() -> dict[str, Any]:
        async def main() -> dict[str, Any]:
            async with Client(build_server(w, AGENT)) as client:
                result = await client.call_tool("search_index", {"query": QUERY, "top_n": TOP_N})
                assert not result.is_error, result.content[0].text
                data: dict[str, Any] = parse_block(result.content[0].text)
                return data

        return anyio.run(main)

    check(paused(w, tmp_path, monkeypatch, call, before[0], "hybrid"), before, before[0])


def test_the_next_candidates_are_read_only_when_a_hit_went_missing(
    make_ws: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The common path reads the cited rows once (TOP_N of them); after a deletion between the
    checks, once more, for just the one missing (SQLite's statement trace)."""
    import re
    import sqlite3

    w = make_ws()
    fill(w)
    conn = w.ctx.catalog.conn  # this thread's: the keyword-only search runs on it
    if not isinstance(conn, sqlite3.Connection):
        pytest.skip("the statement trace is SQLite's")

    def cited_reads(victim: str | None) -> tuple[list[int], dict[str, Any]]:
        statements: list[str] = []
        where = tmp_path / f"pause-{victim}"
        where.mkdir()
        deleter = None
        if victim:
            monkeypatch.setenv("GITKB_PAUSE_AT", "search.full_rows")
            monkeypatch.setenv("GITKB_PAUSE_DIR", str(where))

            def delete() -> None:
                wait_until(lambda: (where / "search.full_rows.reached").exists(), timeout=60)
                ok(w.document_index("DELETE_DOCUMENT", index_name="kb", filepath=victim))
                (where / "search.full_rows.go").write_text("")

            deleter = threading.Thread(target=delete)
            deleter.start()
        conn.set_trace_callback(statements.append)
        try:
            answer = search(w, "keyword")
        finally:
            conn.set_trace_callback(None)
            monkeypatch.delenv("GITKB_PAUSE_AT", raising=False)
            if deleter is not None:
                deleter.join(60)
        sizes = [
            len(m.group(1).split(","))
            for x in statements
            if "c.line_end, d.id, d.path" in x
            for m in [re.search(r"IN \(([^)]*)\)", x)]
            if m
        ]
        return sizes, answer

    sizes, before = cited_reads(None)
    assert sizes == [TOP_N] and before["count"] == TOP_N
    victim = before["Results"][0]["filepath"]
    sizes, after = cited_reads(victim)
    assert sizes == [TOP_N, 1], sizes
    check(after, [r["filepath"] for r in before["Results"]], victim)
