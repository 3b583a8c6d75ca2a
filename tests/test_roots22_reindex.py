"""A remote REINDEX reads the server's disk only inside ``[server] allowed_roots``.

ADD_DOCUMENTS records each root it walked; a reindex walks them again. A root recorded from the
CLI or the library (or over HTTP before the operator narrowed ``allowed_roots``) was re-read when
a remote caller (the HTTP API, ``gitkb mcp --transport http``) asked for a reindex: new and changed
files outside the allowed roots came into the index, and their names into the answer. Now such a
reindex is refused (``forbidden``, the code of the path check) before anything is read, queued or
written, the whole call when one of its indexes has such a root. An index following a git source
(gitkb's managed clone) or holding only texts has no root of the disk and reindexes as before; the
CLI, the library and ``gitkb mcp`` over stdio keep the operator's rights.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gitkb.mcp import build_server
from gitkb.stores.catalog import changes
from helpers import Upstream, cli_runner, error_message, ok
from test_caps21_mcp import _data, _session, mcp_over_http

OPS = "o" * 24
TOKEN = f'[[server.tokens]]\nname = "ops"\ntoken = "{OPS}"\nscopes = ["write"]\n'  # write: + operate


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "a.md").write_text("# A\n\nInside the root: rollback checklist.\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "s.md").write_text("# S\n\nOutside the root: the release calendar.\n")
    os.symlink(outside, allowed / "escape")
    return {"allowed": allowed, "outside": outside}


def _roots(tree: dict[str, Path]) -> str:
    return f'[server]\nallowed_roots = ["{tree["allowed"]}"]\n'


def _fill(ws: Any, tree: dict[str, Path]) -> None:
    """Index ``in`` from the allowed root, ``out`` from outside it, ``text`` from texts only (the library)."""
    for name, path in (("in", tree["allowed"] / "a.md"), ("out", tree["outside"])):
        ok(ws.document_index("CREATE_INDEX", index_name=name))
        ok(ws.document_index("ADD_DOCUMENTS", index_name=name, filepath=str(path)))
    ok(ws.document_index("CREATE_INDEX", index_name="text"))
    ok(ws.document_index("ADD_TEXT", index_name="text", text="a note", filepath="note.md"))


def _meanwhile(tree: dict[str, Path]) -> None:
    """The disk changes after the ingest: a new file and an edit outside the roots."""
    (tree["outside"] / "new.md").write_text("# New\n\nthe payroll export\n")
    (tree["outside"] / "s.md").write_text("# S\n\nOutside the root: the merger plan.\n")


def _files(ws: Any, index: str) -> list[str]:
    listed = ok(ws.document_index("LIST_DOCUMENTS", index_name=index))
    return sorted(str(d.get("filepath") or d.get("path")) for d in listed["Documents"])


def _snapshot(ws: Any) -> tuple[Any, ...]:
    """What a refused reindex must leave as it was: the change log, the documents, the jobs."""
    jobs = ok(ws.list_jobs())["Jobs"]
    return changes.head(ws.ctx.catalog.conn), _files(ws, "out"), _files(ws, "in"), len(jobs)


def _nothing_read(ws: Any) -> None:
    for query in ("payroll", "merger"):
        assert ok(ws.document_index("SEARCH", index_name="out", query=query, mode="keyword"))["Results"] == []


def _refused(answer: dict[str, Any], *roots: Path) -> None:
    assert answer["code"] == "forbidden", answer
    details = answer.get("details", answer)["refused_roots"]  # HTTP: under details; MCP: at the top
    assert sorted(r for rs in details.values() for r in rs) == sorted(str(r) for r in roots), answer
    steps = " ".join(answer["next_steps"])
    assert "gitkb reindex" in steps and "allowed_roots" in steps, answer
    assert "new.md" not in json.dumps(answer)


def _error(r: Any) -> dict[str, Any]:
    body = r.json()
    return body["error"] if isinstance(body.get("error"), dict) else body  # type: ignore[no-any-return]


@pytest.mark.parametrize("auth", ["token", "open"])
def test_http_reindex_of_a_root_outside_the_allowed_roots_is_refused(
    make_client: Any, tree: dict[str, Path], auth: str
) -> None:
    """An operate token, and the open API's loopback operator (the local principal), alike."""
    c = make_client((TOKEN if auth == "token" else "") + _roots(tree))
    headers = {"Authorization": f"Bearer {OPS}"} if auth == "token" else {}
    ws = c.app.state.gitkb.workspace
    _fill(ws, tree)
    _meanwhile(tree)
    (tree["allowed"] / "a.md").write_text("# A\n\nInside the root: the failover drill.\n")
    before = _snapshot(ws)
    for body in ({"index_name": "out"}, {"index_name": "out", "force": True}, {}):
        r = c.post("/reindex", json=body, headers=headers)
        assert r.status_code == 403, (body, r.json())
        _refused(_error(r), tree["outside"])
    for action in ("REINDEX", "reindex"):  # the action API runs document_index actions only
        r = c.post("/actions/document_index", json={"action": action, "index_name": "out"}, headers=headers)
        assert r.status_code == 400, r.json()
    assert _snapshot(ws) == before
    _nothing_read(ws)
    failover = {"index_name": "in", "query": "failover", "mode": "keyword"}
    assert ok(ws.document_index("SEARCH", **failover))["Results"] == []  # every index: none reindexed
    r = c.post("/reindex", json={"index_name": "in"}, headers=headers)
    assert r.status_code == 200, r.json()
    assert r.json()["modified"] == 1, r.json()
    assert ok(ws.document_index("SEARCH", **failover))["Results"]
    r = c.post("/reindex", json={"index_name": "text"}, headers=headers)  # texts only: no root
    assert r.status_code == 200, r.json()


def test_http_reindex_resolves_a_recorded_root_that_is_a_symlink_out(
    make_client: Any, tree: dict[str, Path]
) -> None:
    """The library records the root as named (``allowed/escape``); it is walked where it resolves."""
    c = make_client(_roots(tree))
    ws = c.app.state.gitkb.workspace
    ok(ws.document_index("CREATE_INDEX", index_name="out"))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="out", filepath=str(tree["allowed"] / "escape")))
    _meanwhile(tree)
    before = _snapshot_out(ws)
    r = c.post("/reindex", json={"index_name": "out"})
    assert r.status_code == 403, r.json()
    _refused(_error(r), tree["allowed"] / "escape")
    assert _snapshot_out(ws) == before
    _nothing_read(ws)


def _snapshot_out(ws: Any) -> tuple[Any, ...]:
    return changes.head(ws.ctx.catalog.conn), _files(ws, "out"), len(ok(ws.list_jobs())["Jobs"])


def test_http_reindex_reads_no_root_when_none_is_allowed(make_client: Any, tree: dict[str, Path]) -> None:
    c = make_client(TOKEN)
    headers = {"Authorization": f"Bearer {OPS}"}
    ws = c.app.state.gitkb.workspace
    _fill(ws, tree)
    _meanwhile(tree)
    before = _snapshot(ws)
    r = c.post("/reindex", json={}, headers=headers)
    assert r.status_code == 403, r.json()
    _refused(_error(r), tree["allowed"] / "a.md", tree["outside"])
    assert "disabled" in error_message(r), r.json()
    r = c.post("/reindex", json={"index_name": "in"}, headers=headers)
    assert r.status_code == 403, r.json()
    assert _snapshot(ws) == before
    _nothing_read(ws)
    assert c.post("/reindex", json={"index_name": "text"}, headers=headers).status_code == 200


def test_http_reindex_of_an_index_following_a_source_keeps_working(
    make_client: Any, upstream: Upstream, tree: dict[str, Path]
) -> None:
    """A git-fed index follows its source's managed clone (gitkb's own), not a root of the disk."""
    c = make_client(_roots(tree))
    ws = c.app.state.gitkb.workspace
    ok(ws.source_add("handbook", str(upstream.remote), index="hb"))
    ok(ws.source_sync("handbook"))
    ok(ws.document_index("CREATE_INDEX", index_name="in"))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="in", filepath=str(tree["allowed"])))
    for body in ({"index_name": "hb"}, {}):
        r = c.post("/reindex", json=body)
        assert r.status_code == 200, (body, r.json())
        assert r.json()["status"] == "completed", r.json()


def test_mcp_over_http_reindex_is_held_to_the_allowed_roots(ws: Any, tree: dict[str, Path]) -> None:
    _fill(ws, tree)
    _meanwhile(tree)
    before = _snapshot(ws)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("reindex", {"index_name": "out"}),
        ("reindex", {}),
        ("reindex", {"index_name": "in"}),
        ("reindex", {"index_name": "text"}),
    ]
    with mcp_over_http(ws, None, _roots(tree)) as url:
        _, (one, every, inside, text) = _session(url, calls)
    for result in (one, every):
        assert result.is_error, result.content[0].text
        _refused(_data(result), tree["outside"])
    for result in (inside, text):
        assert not result.is_error, result.content[0].text
        assert _data(result)["status"] == "completed", result.content[0].text
    head, out, _, _ = before
    assert (changes.head(ws.ctx.catalog.conn), _files(ws, "out")) == (head, out)
    _nothing_read(ws)


def test_mcp_over_stdio_reindexes_a_root_outside_the_allowed_roots(ws: Any, tree: dict[str, Path]) -> None:
    """``gitkb mcp`` over stdio is a process the operator started: the CLI's rights."""
    (ws.home / "gitkb.toml").write_text(_roots(tree))
    _fill(ws, tree)
    _meanwhile(tree)
    _, (got,) = _session(build_server(ws), [("reindex", {"index_name": "out"})])
    assert not got.is_error, got.content[0].text
    assert (_data(got)["added"], _data(got)["modified"]) == (1, 1), got.content[0].text
    assert any(f.endswith("new.md") for f in _files(ws, "out"))


def test_cli_reindex_of_a_root_outside_the_allowed_roots_still_works(
    home: Path, tree: dict[str, Path]
) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "gitkb.toml").write_text(_roots(tree))
    run = cli_runner(home)

    run("index", "create", "out")
    run("add", "out", str(tree["outside"]))
    _meanwhile(tree)
    run("reindex", "--index", "out")
    assert "new.md" in run("docs", "list", "out", "--files-only")
