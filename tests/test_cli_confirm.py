"""`gitkb index delete`, `source remove` and `kb delete` ask on a terminal, naming what goes, and
take --yes; without a terminal, or with --json, they refuse unless --yes (exit 2, saying so).
Per-item removals (`docs rm`) do not ask."""

from __future__ import annotations

import json
from pathlib import Path

from cli_tty import no_tty, on_tty, pages, workspace
from helpers import Upstream


def indexes(home: Path) -> list[str]:
    return list(json.loads(no_tty("--home", str(home), "--json", "index", "list").stdout)["IndexDetails"])


def an_index(tmp_path: Path) -> Path:
    home = workspace(tmp_path)
    assert no_tty("--home", str(home), "index", "create", "kb").code == 0
    added = no_tty("--home", str(home), "add", "kb", str(pages(tmp_path / "pages", 3, words=60)))
    assert added.code == 0, added.stderr
    return home


def test_index_delete_refuses_without_a_terminal_unless_yes(tmp_path: Path) -> None:
    home = an_index(tmp_path)
    refused = no_tty("--home", str(home), "index", "delete", "kb")
    assert refused.code == 2, refused
    assert (
        "--yes" in refused.stderr
        and "without a terminal" in refused.stderr
        and "Nothing was deleted" in refused.stderr
    )
    assert indexes(home) == ["kb"]
    done = no_tty("--home", str(home), "index", "delete", "kb", "--yes")
    assert done.code == 0, done.stderr
    assert indexes(home) == []


def test_index_delete_with_json_refuses_even_on_a_terminal(tmp_path: Path) -> None:
    home = an_index(tmp_path)
    refused = on_tty("--home", str(home), "--json", "index", "delete", "kb")
    assert refused.code == 2 and "with --json it needs --yes" in refused.tty, refused
    assert refused.stdout == ""  # no response dict: nothing was asked of the library
    assert indexes(home) == ["kb"]
    done = on_tty("--home", str(home), "--json", "index", "delete", "kb", "--yes")
    assert done.code == 0 and json.loads(done.stdout)["Success"] is True


def test_index_delete_asks_on_a_terminal_naming_what_goes(tmp_path: Path) -> None:
    home = an_index(tmp_path)
    chunks = json.loads(no_tty("--home", str(home), "--json", "index", "list").stdout)["IndexDetails"]["kb"][
        "chunk_count"
    ]
    declined = on_tty("--home", str(home), "index", "delete", "kb", answer="n")
    assert declined.code == 1, declined
    assert "This deletes index 'kb'" in declined.tty
    assert "3 document(s)" in declined.tty and f"{chunks} chunk(s)" in declined.tty
    assert f"{chunks} vector(s)" in declined.tty  # the add waited for them: every chunk has one
    assert "Nothing was deleted" in declined.tty
    assert indexes(home) == ["kb"]
    accepted = on_tty("--home", str(home), "index", "delete", "kb", answer="y")
    assert accepted.code == 0, accepted
    assert indexes(home) == []


def test_kb_delete_confirms(tmp_path: Path) -> None:
    home = an_index(tmp_path)
    assert no_tty("--home", str(home), "kb", "create", "ops", "--index", "kb").code == 0
    refused = no_tty("--home", str(home), "kb", "delete", "ops")
    assert refused.code == 2 and "--yes" in refused.stderr
    declined = on_tty("--home", str(home), "kb", "delete", "ops", answer="n")
    assert (
        declined.code == 1
        and "knowledge base 'ops'" in declined.tty
        and "keep their documents" in declined.tty
    )
    listed = json.loads(no_tty("--home", str(home), "--json", "kb", "list").stdout)["KnowledgeBases"]
    assert [k["name"] for k in listed] == ["ops"]
    assert on_tty("--home", str(home), "kb", "delete", "ops", answer="y").code == 0
    assert json.loads(no_tty("--home", str(home), "--json", "kb", "list").stdout)["KnowledgeBases"] == []
    assert indexes(home) == ["kb"]  # a knowledge base's indexes stay


def test_source_remove_confirms(tmp_path: Path, upstream: Upstream) -> None:
    home = workspace(tmp_path)
    assert no_tty("--home", str(home), "source", "add", "handbook", str(upstream.remote)).code == 0
    assert no_tty("--home", str(home), "source", "sync", "handbook").code == 0
    refused = no_tty("--home", str(home), "source", "remove", "handbook")
    assert refused.code == 2 and "--yes" in refused.stderr
    declined = on_tty("--home", str(home), "source", "remove", "handbook", answer="n")
    assert declined.code == 1, declined
    assert "its clone of" in declined.tty and "document(s)" in declined.tty and "vectors" in declined.tty
    clones = home / "repos"
    assert len(list(clones.iterdir())) == 1  # declining left the clone
    listed = json.loads(no_tty("--home", str(home), "--json", "source", "list").stdout)["Sources"]
    assert [s["name"] for s in listed] == ["handbook"]
    accepted = on_tty("--home", str(home), "source", "remove", "handbook", answer="y")
    assert accepted.code == 0, accepted
    assert json.loads(no_tty("--home", str(home), "--json", "source", "list").stdout)["Sources"] == []
    assert not any(clones.iterdir())


def test_per_item_removals_do_not_ask(tmp_path: Path) -> None:
    home = an_index(tmp_path)
    removed = no_tty("--home", str(home), "docs", "rm", "kb", "pages/page000.md")
    assert removed.code == 0, removed.stderr
