"""ADD_TEXT's ``filepath`` and RENAME_DOCUMENT's new name are checked like every stored path,
on every interface (library, CLI, HTTP, MCP); names reach a terminal escaped.

``ATTACKS`` are the bad names tried; each is sent through each interface and must be refused
with ``invalid_argument`` with nothing written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from mcp import Client

from gitkb.cli.main import cli
from gitkb.mcp import build_server
from helpers import error_code, fails, ok

ATTACKS: list[str] = [
    "../../etc/passwd",
    "docs/../../outside.md",
    "docs/./../../x.md",
    "..\\..\\windows.md",
    "/etc/passwd",
    "//server/share.md",
    "C:\\Windows\\system.ini",
    ".git/config",
    "docs/.git/hooks/pre-commit",
    "docs/.GIT/config",
    "docs/.git./config",
    "git~1/config",
    ".git",
    "a\x00b.md",
    "evil\x1b[2J\x1b]0;pwned\x07.md",
    "docs/\x1b[31mred.md",
    "new\nline.md",
    "carriage\rreturn.md",
    "tab\there.md",
    "del\x7f.md",
    "c1\x85next-line.md",
    "csi\x9b31m.md",
    "line\u2028separator.md",
    "not-utf8-\udcff\udcfe.md",
    "docs/" + "x" * 300 + ".md",
    "",
    "   ",
    "/",
    "./",
]
ALLOWED = [
    "docs/ops/rotate.md",
    "./notes/a.md",
    "notes//b.md",
    "dir\\c.md",
    "ünïcødé/名前.md",
    "my notes/x y.md",
]


def doc_count(ws: Any) -> tuple[int, int]:
    conn = ws.ctx.catalog.conn
    return (
        int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]),
        int(conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]),
    )


@pytest.fixture
def kb(ws: Any) -> Any:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    return ws


# -- library ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ATTACKS, ids=[repr(a)[:40] for a in ATTACKS])
def test_library_refuses_bad_filepaths(kb: Any, bad: str) -> None:
    before = doc_count(kb)
    out = fails(
        kb.document_index("ADD_TEXT", index_name="kb", text="planted text", filepath=bad), "invalid_argument"
    )
    assert "\x1b" not in out["Error"] and "\x00" not in out["Error"]
    out["Error"].encode("utf-8")  # printable anywhere: no lone surrogate
    assert doc_count(kb) == before


def test_library_keeps_ordinary_paths(kb: Any) -> None:
    stored = [
        ok(kb.document_index("ADD_TEXT", index_name="kb", text=f"text {i}", filepath=p))["filepath"]
        for i, p in enumerate(ALLOWED)
    ]
    assert stored == [
        "docs/ops/rotate.md",
        "notes/a.md",
        "notes/b.md",
        "dir/c.md",
        "ünïcødé/名前.md",
        "my notes/x y.md",
    ]


def test_bulk_add_texts_refuses_bad_filepaths(kb: Any) -> None:
    from gitkb.services.indexing import ingest_text

    for bad in ("../x.md", ".git/config", "a\x1bb.md"):
        with pytest.raises(Exception) as info:
            ingest_text.add_texts(
                kb.ctx, "kb", [{"text": "fine", "filepath": "ok.md"}, {"text": "x", "filepath": bad}]
            )
        assert getattr(info.value, "code", None) == "invalid_argument"
    assert doc_count(kb) == (0, 0)


@pytest.mark.parametrize(
    "bad", ["../up.md", ".git", "esc\x1b[2J.md", "nul\x00.md", "nl\n.md", "\udcff.md", "a/b.md"]
)
def test_rename_refuses_bad_new_names(kb: Any, bad: str) -> None:
    ok(kb.document_index("ADD_TEXT", index_name="kb", text="rename me", filepath="ops/a.md"))
    fails(
        kb.document_index("RENAME_DOCUMENT", index_name="kb", filepath="ops/a.md", new_filename=bad),
        "invalid_argument",
    )
    listed = ok(kb.document_index("LIST_DOCUMENTS", index_name="kb", show_files_only=True))["Documents"]
    assert [d["path"] for d in listed] == ["ops/a.md"]


# -- CLI --------------------------------------------------------------------------------------


def cli_run(home: Path, *args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(cli, ["--home", str(home), *args], input=input, catch_exceptions=False)


@pytest.fixture
def cli_home(home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "gitkb.toml").write_text('[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n')
    r = cli_run(home, "index", "create", "kb")
    assert r.exit_code == 0, r.output
    return home


CLI_ATTACKS = [a for a in ATTACKS if a.strip() and "\x00" not in a]  # argv cannot carry NUL; '' is "no path"


@pytest.mark.parametrize("bad", CLI_ATTACKS, ids=[repr(a)[:40] for a in CLI_ATTACKS])
def test_cli_add_text_refuses_bad_filepaths(cli_home: Path, bad: str) -> None:
    r = cli_run(cli_home, "add-text", "kb", "planted text", "--filepath", bad, "--no-wait")
    assert r.exit_code == 1, r.output
    assert r.output.startswith("error: ") and ("invalid" in r.output or "must name a document" in r.output)
    assert "\x1b" not in r.output and "\x07" not in r.output
    listed = cli_run(cli_home, "--json", "docs", "list", "kb")
    assert json.loads(listed.output)["Documents"] == []


# -- HTTP ------------------------------------------------------------------------------------


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    c = make_client()
    r = c.post("/indexes", json={"index_name": "kb"})
    assert r.status_code == 200, r.text
    return c


def _json(value: dict[str, Any]) -> bytes:
    return json.dumps(value).encode()  # ensure_ascii: lone surrogates travel as \\udcff


@pytest.mark.parametrize("bad", ATTACKS, ids=[repr(a)[:40] for a in ATTACKS])
def test_http_refuses_bad_filepaths(client: TestClient, bad: str) -> None:
    headers = {"content-type": "application/json"}
    r1 = client.post(
        "/indexes/kb/texts", content=_json({"text": "planted", "filepath": bad}), headers=headers
    )
    r2 = client.post(
        "/actions/document_index",
        content=_json({"action": "ADD_TEXT", "index_name": "kb", "text": "planted", "filepath": bad}),
        headers=headers,
    )
    for r in (r1, r2):
        assert r.status_code == 400, r.text
        assert error_code(r) == "invalid_argument"
    listed = client.get("/indexes/kb/documents", params={"show_files_only": True}).json()
    assert listed["Documents"] == []


# -- MCP -------------------------------------------------------------------------------------


def mcp_call(ws: Any, tool: str, args: dict[str, Any]) -> tuple[bool, str, Any]:
    async def main() -> Any:
        async with Client(build_server(ws, None)) as client:
            return await client.call_tool(tool, args)

    r = anyio.run(main)
    return bool(r.is_error), r.content[0].text, r.structured_content


def test_mcp_refuses_bad_filepaths(kb: Any) -> None:
    for bad in ATTACKS:
        is_error, text, structured = mcp_call(
            kb,
            "document_index",
            {"action": "ADD_TEXT", "index_name": "kb", "text": "planted", "filepath": bad},
        )
        body = structured if isinstance(structured, dict) else json.loads(text)
        assert is_error and body["Success"] is False and body["code"] == "invalid_argument", (bad, body)
        assert "\x1b" not in text
    assert doc_count(kb) == (0, 0)


# -- terminal ---------------------------------------------------------------------------------


def test_docs_list_escapes_control_characters(cli_home: Path) -> None:
    title = "\x1b]0;pwned\x07\x1b[2J\u202eevil"
    r = cli_run(
        cli_home,
        "add-text",
        "kb",
        "body text",
        "--filepath",
        "ops/a.md",
        "--metadata",
        json.dumps({"title": title}),
        "--no-wait",
    )
    assert r.exit_code == 0, r.output
    r = cli_run(
        cli_home,
        "add-text",
        "kb",
        "# \x1b[31mRed heading\n\nSome body.\n",
        "--filepath",
        "ops/b.md",
        "--no-wait",
    )
    assert r.exit_code == 0, r.output
    for args in (
        ("docs", "list", "kb"),
        ("search", "body", "--index", "kb", "--mode", "keyword"),
        ("docs", "get", "kb", "ops/b.md"),
    ):
        out = cli_run(cli_home, *args)
        assert out.exit_code == 0, out.output
        assert "\x1b" not in out.output and "\x07" not in out.output and "\u202e" not in out.output, args
    listed = cli_run(cli_home, "docs", "list", "kb").output
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\u202eevil" in listed
    raw = json.loads(cli_run(cli_home, "--json", "docs", "list", "kb").output)  # --json keeps the data
    assert title in [d["title"] for d in raw["Documents"]]


def test_escaping_covers_names_stored_before_the_rules(ws: Any, cli_home: Path) -> None:
    """A row written by an older gitkb (or by hand) still prints escaped."""
    from gitkb import Workspace

    w = Workspace(cli_home)
    try:
        ok(w.document_index("ADD_TEXT", index_name="kb", text="legacy words", filepath="ops/legacy.md"))
        with w.ctx.catalog.write() as conn:
            conn.execute(
                "UPDATE documents SET path=? WHERE path=?", ("ops/\x1b[2Jlegacy\x9b.md", "ops/legacy.md")
            )
    finally:
        w.close()
    out = cli_run(cli_home, "docs", "list", "kb", "--files-only")
    assert out.exit_code == 0, out.output
    assert (
        "ops/\\x1b[2Jlegacy\\x9b.md" in out.output and "\x1b" not in out.output and "\x9b" not in out.output
    )
