"""On the terminal, error hints name CLI commands (``gitkb index create``), not action names
(``CREATE_INDEX``) or library methods (``propose_kb_edit(...)``); ``--json`` keeps the dict."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitkb.cli.hints import COMMANDS, cli_words
from gitkb.cli.main import cli
from gitkb.workspace import Workspace

SRC = Path(__file__).resolve().parents[1] / "src" / "gitkb"


def action_names() -> set[str]:
    from gitkb.services.dispatch import actions

    return set(getattr(actions, "ACTIONS", {})) | {k for k in COMMANDS if k.isupper()}


def method_names() -> set[str]:
    return {n for n in dir(Workspace) if "_" in n.strip("_") and not n.startswith("_")}


def library_hints() -> list[tuple[str, str]]:
    """Every string literal in a ``next_steps`` of the library (services, stores, core, forges)."""
    out = []
    for path in SRC.rglob("*.py"):
        if path.relative_to(SRC).parts[0] in ("cli", "http", "mcp"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            value = None
            if isinstance(node, ast.keyword) and node.arg == "next_steps":
                value = node.value
            elif isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values, strict=True):
                    if isinstance(k, ast.Constant) and k.value == "next_steps":
                        value = v
            if value is None:
                continue
            for c in ast.walk(value):
                if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.strip():
                    out.append((f"{path.relative_to(SRC)}:{c.lineno}", c.value))
    return out


def names_left(text: str, names: set[str]) -> list[str]:
    outside = re.sub(r"`[^`]*`", "", text)  # what the table put in is a command, in backticks
    return [n for n in names if re.search(rf"\b{re.escape(n)}\b", outside)]


def test_every_library_hint_reads_in_cli_words() -> None:
    names = action_names() | method_names()
    hints = library_hints()
    assert len(hints) > 20
    named = [(where, h) for where, h in hints if names_left(h, names)]
    assert len(named) >= 10  # the hints do name actions and methods: the table has work to do
    bad = [(where, h, cli_words(h)) for where, h in named if names_left(cli_words(h), names)]
    assert not bad, bad


@pytest.mark.parametrize(
    ("hint", "cli"),
    [
        (
            "create it with CREATE_INDEX (CLI: gitkb index create NAME)",
            "create it with `gitkb index create NAME`",
        ),
        (
            "LIST_DOCUMENTS shows the stored paths and file ids",
            "`gitkb docs list INDEX` shows the stored paths and file ids",
        ),
        (
            "poll the running jobs with get_job_result, then retry",
            "poll the running jobs with `gitkb jobs get JOB_ID`, then retry",
        ),
        (
            "propose_kb_edit('handbook', '<path under the documents root>', search=..., replace=...)",
            "`gitkb propose handbook '<path under the documents root>' --search ... --replace ...`",
        ),
        ("open_kb_pull_request('handbook') to send them", "`gitkb pr open handbook` to send them"),
        (
            "read it with document_index GET_DOCUMENT (index_name, file_id)",
            "read it with `gitkb docs get INDEX PATH`",
        ),
        ("list them with `gitkb review list`", "list them with `gitkb review list`"),
        ("SEARCHING and CREATE_INDEXES are not names", "SEARCHING and CREATE_INDEXES are not names"),
    ],
)
def test_hints_translate_to_cli_words(hint: str, cli: str) -> None:
    assert cli_words(hint) == cli


def test_the_cli_prints_commands_and_json_keeps_the_dict(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITKB_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("GITKB_EMBEDDING_MODEL", "hashing-384")
    runner = CliRunner()
    assert runner.invoke(cli, ["--home", str(home), "index", "create", "kb"]).exit_code == 0
    r = runner.invoke(cli, ["--home", str(home), "index", "create", "kb"])
    assert r.exit_code == 1
    assert "`gitkb index delete NAME`" in r.stderr and "`gitkb add INDEX PATH`" in r.stderr
    assert "DELETE_INDEX" not in r.stderr and "ADD_DOCUMENTS" not in r.stderr
    r = runner.invoke(cli, ["--home", str(home), "docs", "get", "kb", "nope.md"])
    assert r.exit_code == 1 and "`gitkb docs list INDEX`" in r.stderr and "LIST_DOCUMENTS" not in r.stderr
    r = runner.invoke(cli, ["--home", str(home), "--json", "docs", "get", "kb", "nope.md"])
    body = json.loads(r.stdout)  # the response dict exactly, for scripts
    assert body["code"] == "not_found" and any("LIST_DOCUMENTS" in s for s in body["next_steps"])
