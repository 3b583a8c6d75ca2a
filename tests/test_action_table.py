"""The action table is the one list of actions: every interface's names come from it.

These tests fail when a Workspace method, a document_index action, an MCP tool or a job
kind exists that the table does not declare, or when their parameters disagree with it.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from gitkb.cli.main import cli
from gitkb.core import action_table as table
from gitkb.services.dispatch import actions
from gitkb.workspace import Workspace

SRC = Path(__file__).resolve().parents[1] / "src" / "gitkb"
NOT_ACTIONS = {"document_index", "promoted"}  # dispatchers: they check the action they are given


def _tool_methods() -> dict[str, inspect.Signature]:
    out = {}
    for name, fn in inspect.getmembers(Workspace, inspect.isfunction):
        if name.startswith("_") or name in NOT_ACTIONS or not hasattr(fn, "__wrapped__"):
            continue
        out[name] = inspect.signature(fn.__wrapped__)
    return out


def test_every_library_method_is_an_action_with_the_tables_parameters() -> None:
    methods = _tool_methods()
    assert methods, "the Workspace's @tool methods were found"
    for name, sig in methods.items():
        spec = table.ACTIONS.get(name)
        assert spec is not None, f"Workspace.{name} is not declared in the action table"
        params = {p for p in sig.parameters if p != "self"}
        assert params == set(spec.fields), (name, params ^ set(spec.fields))
    methods_in_table = {a.name for a in table.METHODS}
    assert methods_in_table == set(methods), methods_in_table ^ set(methods)


def test_every_document_index_action_has_one_function() -> None:
    assert set(actions.FUNCTIONS) == set(table.DOCUMENT_INDEX_NAMES)
    for name, fn in actions.FUNCTIONS.items():
        sig = inspect.signature(fn)
        if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
            continue
        taken = {p for p in sig.parameters if p != "ctx"}
        assert set(table.ACTIONS[name].fields) <= taken, (name, set(table.ACTIONS[name].fields) - taken)


def test_classes_nest_as_the_access_model_says() -> None:
    inc = table.CLASS_INCLUDES
    assert inc["propose"] >= inc["read"] and inc["write"] >= inc["propose"]
    assert inc["operate"] >= inc["read"] and inc["review"] >= inc["read"]
    assert inc["admin"] == frozenset(table.CLASSES)
    assert "operate" not in inc["write"] and "review" not in inc["write"]


def test_no_other_list_of_action_names_exists_in_the_code() -> None:
    """Outside the table (and the function binding checked above), no module spells out a set
    of two or more action names: interfaces derive theirs from the table."""
    names = set(table.ACTIONS)
    pattern = re.compile(r"[\[{(]\s*(?:\"[A-Za-z_]+\"\s*,\s*){1,}\"[A-Za-z_]+\"")
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "action_table.py":
            continue
        text = path.read_text(encoding="utf-8")
        for m in pattern.finditer(text):
            found = set(re.findall(r"\"([A-Za-z_]+)\"", m.group(0)))
            if len(found & names) >= 2 and found <= names | {"action"}:
                offenders.append(f"{path.relative_to(SRC)}: {m.group(0)[:80]}")
    assert not offenders, offenders


def test_gitkb_actions_prints_the_table() -> None:
    r = CliRunner().invoke(cli, ["--json", "actions"])
    assert r.exit_code == 0, r.output
    data: dict[str, Any] = json.loads(r.output)
    listed = {a["name"]: a["class"] for a in data["Actions"]}
    assert listed == {a.name: a.cls for a in table.ACTIONS.values()}
    assert listed["RECHUNK"] == "operate" and listed["approve_review"] == "review"
    assert listed["source_add"] == "admin" and listed["propose_kb_edit"] == "propose"
    r = CliRunner().invoke(cli, ["actions"])
    assert r.exit_code == 0 and "RECHUNK" in r.output and "operate" in r.output
    same = CliRunner().invoke(cli, ["actions", "--json"])  # the spelling the access issue used
    assert same.exit_code == 0 and json.loads(same.output) == data


def test_limits_are_the_same_on_every_interface(tmp_path: Path) -> None:
    """top_n over 100 and a LIST_DOCUMENTS page over 50 are refused (never cut) by the library, the
    CLI and HTTP alike, with the same message."""
    from fastapi.testclient import TestClient

    from gitkb.http import create_app

    home = tmp_path / "ws"
    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384") as ws:
        assert ws.document_index("CREATE_INDEX", index_name="kb")["Success"]
        lib = [
            ws.document_index("SEARCH", query="x", top_n=101),
            ws.document_index("LIST_DOCUMENTS", index_name="kb", count=51),
        ]
        with TestClient(create_app(ws.settings, workspace=ws), client=("127.0.0.1", 1)) as c:
            http = [
                c.post("/search", json={"query": "x", "top_n": 101}).json(),
                c.get("/indexes/kb/documents", params={"count": 51}).json(),
            ]
    runner = CliRunner()
    cli_out = [
        runner.invoke(cli, ["--home", str(home), "--json", "search", "x", "--top-n", "101"]),
        runner.invoke(cli, ["--home", str(home), "--json", "docs", "list", "kb", "--count", "51"]),
    ]
    for i, want in enumerate(("top_n must be from 1 to 100", "count must be from 1 to 50")):
        assert lib[i]["code"] == http[i]["code"] == "invalid_argument", (lib[i], http[i])
        assert want in lib[i]["Error"] and want in http[i]["Error"], (lib[i], http[i])
        assert cli_out[i].exit_code == 1, cli_out[i].output
        assert want in json.loads(cli_out[i].stdout)["Error"]


def test_every_cli_name_in_the_table_is_a_command() -> None:
    import click

    for spec in table.ACTIONS.values():
        if not spec.cli:
            continue
        words = [w for w in spec.cli.split()[1:] if not w.startswith("-")]
        group: Any = cli
        for w in words:
            assert isinstance(group, click.Group) and w in group.commands, (spec.name, spec.cli)
            group = group.commands[w]
