"""What a user did through gitkb stays done: a delete or a rename of a document that came from a
folder survives ``reindex`` (plain and forced) until ADD_DOCUMENTS names that file again."""

from __future__ import annotations

import os
import time
from pathlib import Path

from click.testing import CliRunner

from gitkb import Workspace
from helpers import cli_runner, fails, ok


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "notes"
    d.mkdir()
    (d / "a.md").write_text("# Alpha\n\nalpha apples\n")
    (d / "b.md").write_text("# Beta\n\nbeta bananas\n")
    (d / "c.md").write_text("# Gamma\n\ngamma grapes\n")
    return d


def _docs(ws: Workspace) -> dict[str, str]:
    r = ok(ws.document_index("LIST_DOCUMENTS", index_name="kb"))
    return {d["path"]: d["file_id"] for d in r["Documents"]}


def _chunk_ids(ws: Workspace, path: str) -> list[str]:
    r = ok(ws.document_index("GET_DOCUMENT", index_name="kb", filepath=path))
    return [c["id"] for c in r["Chunks"]]


def test_delete_and_rename_survive_reindex_until_added_again(ws: Workspace, tmp_path: Path) -> None:
    d = _folder(tmp_path)
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(d)))
    ok(ws.document_index("DELETE_DOCUMENT", index_name="kb", filepath="notes/a.md"))
    ok(ws.document_index("RENAME_DOCUMENT", index_name="kb", filepath="notes/b.md", new_filename="bee.md"))
    before = _docs(ws)
    assert set(before) == {"notes/bee.md", "notes/c.md"}
    bee_chunks = _chunk_ids(ws, "notes/bee.md")

    for force in (False, True):
        r = ok(ws.reindex(force=force))
        assert _docs(ws) == before, f"force={force}: the delete or the rename was undone"
        assert _chunk_ids(ws, "notes/bee.md") == bee_chunks
        assert r["left_out"] == 1 and r["paths"]["left_out"] == ["notes/a.md"]
        assert r["indexes"]["kb"]["left_out"] == 1 and r["deleted"] == 0
        assert "1 left out" in r["Message"]

    # the renamed file still follows the disk under its new name
    (d / "b.md").write_text("# Beta\n\nbeta bananas and blueberries\n")
    future = time.time() + 5
    os.utime(d / "b.md", (future, future))
    r = ok(ws.reindex())
    assert r["paths"]["modified"] == ["notes/bee.md"] and _docs(ws)["notes/bee.md"] == before["notes/bee.md"]
    hits = ok(ws.document_index("SEARCH", mode="keyword", query="blueberries"))["Results"]
    assert [h["filepath"] for h in hits] == ["notes/bee.md"]

    # ADD_DOCUMENTS naming the file again brings it back, and reindex then keeps it
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(d / "a.md"), base_path=str(tmp_path)))
    assert "notes/a.md" in _docs(ws)
    r = ok(ws.reindex())
    assert "notes/a.md" in _docs(ws) and r["left_out"] == 0


def test_cli_docs_rm_then_reindex(home: Path, tmp_path: Path) -> None:
    d = _folder(tmp_path)
    run = cli_runner(home)

    run("index", "create", "kb")
    run("add", "kb", str(d), "--no-wait")
    run("docs", "rm", "kb", "notes/c.md")
    out = run("reindex")
    assert "1 left out" in out, out
    assert "notes/c.md" not in run("docs", "list", "kb", "--files-only")


def test_get_document_past_the_end_says_so(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    text = "".join(f"line {i}\n" for i in range(312))
    ok(ws.document_index("ADD_TEXT", index_name="kb", text=text, filepath="long.txt"))
    r = fails(
        ws.document_index(
            "GET_DOCUMENT", index_name="kb", filepath="long.txt", pagination_mode="lines", start=5000
        ),
        "invalid_argument",
    )
    assert "start 5000 is past the end (312 lines)" in r["Error"]
    chars = len(text)
    r = fails(
        ws.document_index(
            "GET_DOCUMENT", index_name="kb", filepath="long.txt", pagination_mode="chars", start=chars
        ),
        "invalid_argument",
    )
    assert f"past the end ({chars} characters)" in r["Error"]
    n = ok(ws.document_index("GET_DOCUMENT", index_name="kb", filepath="long.txt"))["total"]
    r = fails(
        ws.document_index("GET_DOCUMENT", index_name="kb", filepath="long.txt", start=n + 3),
        "invalid_argument",
    )
    assert f"past the end ({n} chunks)" in r["Error"]
    # the last line is still readable, and start 0 of anything is never an error
    last = ok(
        ws.document_index(
            "GET_DOCUMENT", index_name="kb", filepath="long.txt", pagination_mode="lines", start=311
        )
    )
    assert last["Content"] == "line 311\n" and last["has_more"] is False


def test_cli_get_past_the_end_exits_1(home: Path) -> None:
    from gitkb.cli.main import cli

    env = {
        "GITKB_HOME": str(home),
        "GITKB_EMBEDDING_PROVIDER": "hashing",
        "GITKB_EMBEDDING_MODEL": "hashing-384",
    }
    runner = CliRunner()
    assert runner.invoke(cli, ["index", "create", "kb"], env=env).exit_code == 0
    assert (
        runner.invoke(
            cli, ["add-text", "kb", "one\ntwo\n", "--filepath", "t.txt", "--no-wait"], env=env
        ).exit_code
        == 0
    )
    res = runner.invoke(cli, ["docs", "get", "kb", "t.txt", "--start", "5000"], env=env)
    assert res.exit_code == 1 and "past the end (2 lines)" in res.output + (
        res.stderr if res.stderr_bytes else ""
    )
