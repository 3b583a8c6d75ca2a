"""redteam23: every caller gets exactly what it asked for, the same on every interface."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from helpers import SOURCE, ok
from test_eval import beir_folder, qa_folder

BOT = "c" * 24
TOML = f'[[server.tokens]]\nname = "bot"\ntoken = "{BOT}"\nscopes = ["read"]\nagent = "alice"\n'


def _tenanted(ws: Any) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    for name in ("a", "b"):
        ok(
            ws.document_index(
                "ADD_TEXT", index_name="kb", text=f"key rotation {name}", filepath=f"{name}.md", tenant="acme"
            )
        )
    ok(ws.kb_create("k", ["kb"]))
    ok(ws.agent_assign("alice", ["k"], mode="read"))


def _search_index(how: str, ws: Any, client: Any, args: dict[str, Any]) -> dict[str, Any]:
    if how == "library":
        return ok(ws.as_agent("alice").search_index(**args))
    if how == "mcp":

        async def main() -> Any:
            async with Client(build_server(ws, "alice")) as c:
                return await c.call_tool("search_index", args)

        r = anyio.run(main)
        assert not r.is_error, r.content[0].text
        return dict(parse_block(r.content[0].text))
    r = client.post("/search_index", json=args, headers={"Authorization": f"Bearer {BOT}"})
    assert r.status_code == 200, r.text
    return dict(r.json())


@pytest.mark.parametrize("how", ["library", "mcp", "http"])
@pytest.mark.parametrize("tenant", [" acme ", "acme\u00a0"])
def test_search_index_warns_of_the_tenant_it_searched(make_client: Any, how: str, tenant: str) -> None:
    """SEARCH takes a tenant with its surrounding spaces off (``check_tenant``) and finds acme's
    documents; search_index searched the same but checked its warning with the tenant as sent, so
    its answer held both acme's hits and "index 'kb' has no documents for tenant ' acme ' ...
    (results for this index are empty)". Now the warning is about the tenant searched: none here."""
    client = make_client(TOML)
    ws = client.app.state.gitkb.workspace
    _tenanted(ws)
    out = _search_index(how, ws, client, {"query": "key rotation", "tenant": tenant, "mode": "keyword"})
    assert out["count"] == 2, out
    assert not out.get("Warnings"), out
    plain = ok(
        ws.document_index("SEARCH", query="key rotation", tenant=tenant, mode="keyword", indexes=["kb"])
    )
    assert len(plain["Results"]) == 2 and not plain.get("Warnings"), plain


def test_search_index_still_warns_of_a_tenant_with_no_documents(ws: Any) -> None:
    """Over-fixing guard: a tenant that really has nothing here is still warned about."""
    _tenanted(ws)
    out = ok(ws.as_agent("alice").search_index("key rotation", tenant=" globex ", mode="keyword"))
    assert out["count"] == 0 and any("tenant 'globex'" in w for w in out["Warnings"]), out


BAD_TOP_N = [True, False, 0, -1, 101, 10**30, "10", 10.0, [10]]


@pytest.mark.parametrize("bad", BAD_TOP_N, ids=repr)
def test_eval_top_n_out_of_range_or_of_another_type_is_refused_before_anything_is_built(
    ws: Any, tmp_path: Any, bad: Any
) -> None:
    """Held: gitkb eval's top_n is the action table's 1-100 integer on the library (a boolean, a
    float, a string, a huge or negative number refused), before the eval index is built."""
    root = beir_folder(tmp_path / "tiny")
    for r in (ws.eval_beir(str(root), split="test", top_n=bad), ws.eval_qa(str(root), top_n=bad, ask=False)):
        assert r["Success"] is False and r["code"] == "invalid_argument" and "top_n" in r["Error"], r
    assert ok(ws.document_index("LIST_INDICES"))["Indices"] == []


@pytest.mark.parametrize("bad", ["-5", "101", "ten", "1e3", "10.0", ""])
def test_cli_eval_top_n_refuses_what_the_library_refuses(home: Any, tmp_path: Any, bad: str) -> None:
    from gitkb.cli.main import cli  # the CLI's own import, as tests/test_eval.py does

    root = beir_folder(tmp_path / "tiny")
    res = CliRunner().invoke(
        cli, ["--home", str(home), "eval", "beir", str(root), "--split", "test", "--top-n", bad]
    )
    assert res.exit_code == 2 and "--top-n" in res.output, res.output


CRLF = "# Retention\r\n\r\nKeep logs 30 days.\r\nOld line\rend\r\n"


def test_cli_propose_stages_the_content_files_bytes_as_the_library_does(
    source_ws: Any, tmp_path: Any
) -> None:
    """``gitkb propose --content-file`` read the file with universal newlines (Path.read_text): a
    CRLF file (or a lone CR) was staged with LF line ends, every line of a CRLF document changed,
    while the library and HTTP stage the text as given. Now the file's exact text is staged."""
    from gitkb.cli.main import cli  # the CLI's own import, as tests/test_proposal_refresh.py does

    ws = source_ws
    lib = ok(ws.propose_kb_edit(SOURCE, "policies/crlf-library.md", content=CRLF))
    home = str(ws.home)
    ws.close()
    f = tmp_path / "new.md"
    f.write_bytes(CRLF.encode("utf-8"))
    res = CliRunner().invoke(
        cli,
        ["--home", home, "propose", SOURCE, "policies/crlf-cli.md", "--content-file", str(f)],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    [repo] = list((Path(home) / "repos").iterdir())
    branch = f"gitkb/proposals/{SOURCE}"
    for path in ("docs/policies/crlf-library.md", "docs/policies/crlf-cli.md"):
        blob = subprocess.run(
            ["git", "-C", str(repo), "show", f"{branch}:{path}"], capture_output=True, check=True
        ).stdout
        assert blob == CRLF.encode("utf-8"), (path, blob)
    assert lib["op"] == "add"


def test_cli_add_text_from_standard_input_stores_the_text_as_sent(home: Path, ws: Any) -> None:
    """``gitkb add-text INDEX -`` read standard input as text (universal newlines): CRLF and a lone
    CR arrived as LF, so the stored text, its character offsets and its line numbers (a lone CR is
    no line break to the library) differed from the same text given to the library or HTTP."""
    from gitkb.cli.main import cli  # the CLI's own import, as tests/test_eval.py does

    text = "line one\r\nline two\rthree\r\n"
    ok(ws.document_index("CREATE_INDEX", index_name="t"))
    ok(ws.document_index("ADD_TEXT", index_name="t", text=text, filepath="lib.md"))
    ws.close()
    res = CliRunner().invoke(
        cli,
        ["--home", str(home), "add-text", "t", "-", "--filepath", "cli.md", "--no-wait"],
        input=text.encode(),
    )
    assert res.exit_code == 0, res.output
    from gitkb import Workspace  # a fresh handle on the same home, after the CLI's

    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384") as w:
        got = {
            p: ok(w.document_index("GET_DOCUMENT", index_name="t", filepath=p))["Chunks"]
            for p in ("lib.md", "cli.md")
        }
    assert [c["text"] for c in got["cli.md"]] == [c["text"] for c in got["lib.md"]] == [text], got
    assert [c["location"] for c in got["cli.md"]] == [c["location"] for c in got["lib.md"]], got


def test_eval_refuses_to_write_its_corpus_into_a_git_fed_index(source_ws: Any, tmp_path: Path) -> None:
    """Held: ``gitkb eval beir DIR --index handbook`` reuses an existing index by name; into the
    git-fed one agents read it is refused (managed_repo_guard, the ingest services' own check) with
    nothing written, for beir and qa; a new eval index is built as before."""
    ws = source_ws
    root = beir_folder(tmp_path / "tiny")
    hits = len(
        ok(ws.document_index("SEARCH", query="a", index_name=SOURCE, mode="keyword", top_n=100))["Results"]
    )
    for r in (
        ws.eval_beir(str(root), split="test", index_name=SOURCE),
        ws.eval_qa(str(qa_folder(tmp_path / "qa")), index_name=SOURCE, ask=False),
    ):
        assert r["Success"] is False and r["code"] == "managed_repo_guard", r
    docs = ok(ws.document_index("LIST_DOCUMENTS", index_name=SOURCE, count=50))
    assert all(not str(d.get("filepath", "")).startswith(("corpus/", "beir/")) for d in docs["Documents"]), (
        docs
    )
    assert (
        len(
            ok(ws.document_index("SEARCH", query="a", index_name=SOURCE, mode="keyword", top_n=100))[
                "Results"
            ]
        )
        == hits
    )
    assert ok(ws.eval_beir(str(root), split="test"))["index_name"] != SOURCE
