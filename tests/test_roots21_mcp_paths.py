"""``gitkb mcp --transport http`` reads the server's disk only inside ``[server] allowed_roots``,
through the HTTP API's own check (``gitkb.http.limits.guarded``); over stdio it keeps the
operator's rights (a process the operator started, like the CLI).

Before, an operator session over MCP-over-HTTP (no ``--agent``, no auth: whoever reaches the port)
could ADD_DOCUMENTS any path the server's user can read, which the HTTP API refuses unless it lies
under an allowed root (none set: refused).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from gitkb.core import action_table as table
from gitkb.http.limits import SERVER_PATHS
from gitkb.mcp import build_server
from gitkb.mcp.tools import TOOL_NAMES
from helpers import ok, wait_until
from test_caps21_mcp import _data, _session, mcp_over_http


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "docs"
    (root / "team").mkdir(parents=True)
    (root / "team" / "a.md").write_text("# A\n\nInside the root: rollback checklist.\n")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "s.md").write_text("# S\n\nOutside the root: the database password.\n")
    os.symlink(outside, root / "escape")
    return {"root": root, "outside": outside}


def _add(path: Path | str, **extra: Any) -> tuple[str, dict[str, Any]]:
    return ("document_index", {"action": "ADD_DOCUMENTS", "index_name": "kb", "filepath": str(path), **extra})


def _documents(ws: Any) -> list[str]:
    listed = ok(ws.document_index("LIST_DOCUMENTS", index_name="kb"))
    return sorted(str(d.get("filepath") or d.get("path")) for d in listed["Documents"])


def _settled(ws: Any, result: Any) -> dict[str, Any]:
    """An ADD_DOCUMENTS answer; one that became a job, once the job is done."""
    data = _data(result)
    if data.get("status") == "working":
        wait_until(
            lambda: ws.get_job_result(data["job_id"]).get("status") == "completed",
            timeout=30,
            what="the ADD_DOCUMENTS job",
        )
    return data


def test_mcp_over_http_refuses_every_path_when_no_root_is_allowed(ws: Any, tree: dict[str, Path]) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    with mcp_over_http(ws, None, "") as url:
        _, got = _session(url, [_add(tree["root"]), _add(tree["outside"])])
    for result in got:
        assert result.is_error and _data(result)["code"] == "forbidden", result.content[0].text
    assert "allowed_roots" in " ".join(_data(got[0])["next_steps"])
    assert _documents(ws) == []


def test_mcp_over_http_reads_only_inside_the_allowed_roots(ws: Any, tree: dict[str, Path]) -> None:
    root, outside = tree["root"], tree["outside"]
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    refused = [
        _add(outside),
        _add(outside / "s.md"),
        _add(root / "escape"),  # a symlink out of the root
        _add(str(root / "team" / "..") + "/../secret"),
        ("document_index", {"action": "add_documents", "index_name": "kb", "filepath": str(outside)}),
        _add(root / "team", base_path=str(outside)),
    ]
    with mcp_over_http(ws, None, f'[server]\nallowed_roots = ["{root}"]\n') as url:
        _, got = _session(url, [*refused, _add("team"), _add(root)])
    *outs, relative, inside = got
    for (_, args), result in zip(refused, outs, strict=True):
        assert result.is_error and _data(result)["code"] == "forbidden", (args, result.content[0].text)
    assert relative.is_error and _data(relative)["code"] == "invalid_argument"
    assert not inside.is_error, inside.content[0].text
    _settled(ws, inside)
    docs = _documents(ws)
    assert docs and all("s.md" not in d for d in docs) and any(d.endswith("a.md") for d in docs), docs
    hits = ok(ws.document_index("SEARCH", index_name="kb", query="password", mode="keyword"))
    assert hits["Results"] == []


def test_mcp_over_stdio_keeps_the_operators_rights(ws: Any, tree: dict[str, Path]) -> None:
    """``gitkb mcp`` over stdio is a process the operator started (the CLI's rights): no roots apply,
    even when gitkb.toml sets some for the HTTP API."""
    (ws.home / "gitkb.toml").write_text(f'[server]\nallowed_roots = ["{tree["root"]}"]\n')
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    _, (added,) = _session(build_server(ws), [_add(tree["outside"])])
    assert not added.is_error, added.content[0].text
    _settled(ws, added)
    assert any(d.endswith("s.md") for d in _documents(ws))


NAMES_NOT_PATHS = {  # path parameters that name a stored document or a file of a source, never the disk
    ("ADD_TEXT", "filepath"),
    ("GET_DOCUMENT", "filepath"),
    ("GET_DOCUMENT", "file_id"),
    ("DELETE_DOCUMENT", "file_id"),
    ("DELETE_DOCUMENT", "filepath"),
    ("RENAME_DOCUMENT", "filepath"),
    ("RENAME_DOCUMENT", "new_filename"),
    ("LIST_DOCUMENTS", "path_filter"),
    ("propose_kb_edit", "relative_path"),
    ("propose_kb_delete", "relative_path"),
    ("propose_kb_rename", "relative_path"),
    ("propose_kb_rename", "new_relative_path"),
}


def test_every_path_parameter_an_mcp_caller_can_send_is_checked_or_a_stored_name() -> None:
    """A new action (or parameter) an MCP tool can reach that takes a path fails here until it is
    a server-side path checked against allowed_roots (``SERVER_PATHS``) or a stored name."""
    reachable = [*table.DOCUMENT_INDEX_NAMES, *sorted(TOOL_NAMES & set(table.ACTIONS))]
    pathlike = re.compile(r"path|dir|file|url|root|archive|folder")
    found = {
        (name, p.name)
        for name in reachable
        for p in table.ACTIONS[name].wire_params
        if p.schema == table.PATH or (pathlike.search(p.name) and p.schema.get("type") == "string")
    }
    checked = {(name, field) for name, fields in SERVER_PATHS.items() for field in fields}
    assert found - NAMES_NOT_PATHS == checked


READER, BOT = "r" * 24, "b" * 24
TOKENS = (
    f'[[server.tokens]]\nname = "reader"\ntoken = "{READER}"\nscopes = ["read"]\n'
    f'[[server.tokens]]\nname = "bot"\ntoken = "{BOT}"\nscopes = ["read"]\nagent = "alice"\n'
)


def _tells_nothing_of_the_disk(answer: dict[str, Any], tree: dict[str, Path]) -> None:
    text = json.dumps(answer)
    assert answer["code"] == "forbidden", answer
    assert str(tree["outside"]) not in text and "allowed_roots" not in text, answer


def test_a_caller_the_policy_refuses_learns_nothing_of_the_servers_disk(
    make_client: Any, tree: dict[str, Path]
) -> None:
    """Before: a read token or an agent's sending a path was told where it resolves (a symlink's
    target) and the allowed roots, before the policy refused it the action."""
    root = tree["root"]
    c = make_client(TOKENS + f'[server]\nallowed_roots = ["{root}"]\n')
    ws = c.app.state.gitkb.workspace
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(ws.kb_create("k", ["kb"]))
    ok(ws.agent_assign("alice", ["k"], mode="write"))
    for token in (READER, BOT):
        auth = {"Authorization": f"Bearer {token}"}
        for path in (root / "escape", tree["outside"]):
            r = c.post("/indexes/kb/documents", json={"filepath": str(path)}, headers=auth)
            assert r.status_code == 403, r.json()
            _tells_nothing_of_the_disk(r.json()["error"] if "error" in r.json() else r.json(), tree)
        for path in (root / "escape", tree["outside"]):  # a local-path source: admin, inside the roots
            r = c.post("/sources", json={"name": "s", "url": str(path)}, headers=auth)
            assert r.status_code == 403, r.json()
            _tells_nothing_of_the_disk(r.json()["error"] if "error" in r.json() else r.json(), tree)
    with mcp_over_http(ws, "alice", "") as url:
        _, got = _session(url, [_add(root / "escape"), _add(tree["outside"])])
    for result in got:
        assert result.is_error
        _tells_nothing_of_the_disk(_data(result), tree)
    assert _documents(ws) == []
