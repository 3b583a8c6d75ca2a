"""Knowledge bases and agent bindings: library, scope and CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitkb.cli.main import cli
from gitkb.services.dispatch import scope


def _setup(ws: Any) -> dict[str, str]:
    ids = {}
    for name, text in (
        ("runbooks", "rotate the signing keys every quarter"),
        ("policies", "retention policy text"),
    ):
        ids[name] = ws.document_index("CREATE_INDEX", index_name=name)["index_id"]
        assert ws.document_index("ADD_TEXT", index_name=name, text=text)["Success"]
    return ids


def test_kb_stores_index_ids_and_follows_renames(ws: Any) -> None:
    ids = _setup(ws)
    out = ws.kb_create("ops", ["runbooks", ids["policies"]])  # names and kidx_ ids both accepted
    assert out["Success"], out
    assert out["index_ids"] == [ids["runbooks"], ids["policies"]]
    assert all(i.startswith("kidx_") and len(i) == 37 for i in out["index_ids"])
    assert ws.document_index("RENAME_INDEX", index_name="runbooks", new_index_name="ops-runbooks")["Success"]
    [kb] = ws.kb_list()["KnowledgeBases"]
    assert [i["index_name"] for i in kb["indexes"]] == ["ops-runbooks", "policies"]
    assert kb["index_ids"] == [ids["runbooks"], ids["policies"]]
    ws.agent_assign("bot", ["ops"])
    hits = ws.search_index("signing keys", mode="keyword", agent_id="bot")
    assert hits["Success"] and hits["count"] == 1
    assert hits["Results"][0]["index_name"] == "ops-runbooks"


@pytest.mark.parametrize(
    "indexes, code",
    [
        (["runbooks", "runbooks"], "invalid_argument"),
        (["runbooks", "@ID"], "invalid_argument"),  # the same index by name and by id
        (["nope"], "not_found"),
        ([], "invalid_argument"),
        ("", "invalid_argument"),
    ],
)
def test_kb_create_rejects_duplicates_and_unknowns(ws: Any, indexes: Any, code: str) -> None:
    ids = _setup(ws)
    if isinstance(indexes, list):
        indexes = [ids["runbooks"] if i == "@ID" else i for i in indexes]
    out = ws.kb_create("ops", indexes)
    assert not out["Success"] and out["code"] == code, out
    assert ws.kb_list()["count"] == 0


def test_kb_name_conflict_and_delete_guard(ws: Any) -> None:
    _setup(ws)
    assert ws.kb_create("ops", ["runbooks"])["Success"]
    dup = ws.kb_create("ops", ["policies"])
    assert dup["code"] == "conflict"
    assert ws.agent_assign("bot", ["ops"])["Success"]
    refused = ws.kb_delete("ops")
    assert refused["code"] == "conflict" and "bot" in refused["Error"] and refused["next_steps"]
    forced = ws.kb_delete("ops", force=True)
    assert forced["Success"] and forced["unassigned"] == ["bot"]
    assert ws.agent_show("bot")["KnowledgeBases"] == []
    assert ws.kb_delete("ops")["code"] == "not_found"


def test_agent_assign_validates(ws: Any) -> None:
    _setup(ws)
    ws.kb_create("ops", ["runbooks"])
    assert ws.agent_assign("bot", ["ops", "ops"])["code"] == "invalid_argument"
    assert ws.agent_assign("bad id!", ["ops"])["code"] == "invalid_argument"
    assert ws.agent_assign("bot", ["missing"])["code"] == "not_found"
    for top_k in (0, 51, "10", True):
        assert ws.agent_assign("bot", ["ops"], default_top_n=top_k)["code"] == "invalid_argument"
    assert ws.agent_show("bot")["code"] == "not_found"  # nothing was created by the refusals


def test_agent_show_read_only_and_default_top_n(ws: Any) -> None:
    ids = _setup(ws)
    ws.kb_create("ops", ["runbooks"])
    ws.kb_create("legal", ["policies", "runbooks"])
    ws.agent_assign("bot", ["ops"], mode="write", default_top_n=3)
    shown = ws.agent_assign("bot", ["legal"], read_only=True)
    assert shown["Success"] and shown["default_top_n"] == 3  # kept when not given again
    access = {i["index_name"]: i for i in shown["Indexes"]}
    assert access["runbooks"]["read_only"] is False and sorted(access["runbooks"]["via"]) == ["legal", "ops"]
    assert access["policies"]["read_only"] is True
    assert (access["runbooks"]["mode"], access["policies"]["mode"]) == ("write", "read")
    sc = scope.load_scope(ws.ctx, "bot")
    assert sc.readable == {ids["runbooks"], ids["policies"]}
    assert sc.writable == sc.proposable == {ids["runbooks"]}
    assert sc.default_top_k == 3
    assert ws.agent_unassign("bot", ["ops"])["unassigned"] == ["ops"]
    assert scope.load_scope(ws.ctx, "bot").writable == frozenset()


def test_list_knowledge_bases_for_an_agent(ws: Any) -> None:
    _setup(ws)
    ws.kb_create("ops", ["runbooks"])
    ws.kb_create("legal", ["policies"])
    ws.agent_assign("bot", ["ops"], read_only=True)
    everything = ws.list_knowledge_bases()
    assert [k["name"] for k in everything["KnowledgeBases"]] == ["legal", "ops"]
    mine = ws.list_knowledge_bases(agent_id="bot")
    assert [k["name"] for k in mine["KnowledgeBases"]] == ["ops"]
    assert mine["KnowledgeBases"][0]["read_only"] is True
    assert "agents" not in mine["KnowledgeBases"][0]  # an agent does not learn who else uses it
    stranger = ws.list_knowledge_bases(agent_id="stranger")
    assert stranger["Success"] and stranger["count"] == 0


def test_deleted_index_is_reported_missing_and_dropped_from_scope(ws: Any) -> None:
    ids = _setup(ws)
    ws.kb_create("ops", ["runbooks", "policies"])
    ws.agent_assign("bot", ["ops"])
    assert ws.document_index("DELETE_INDEX", index_name="policies")["Success"]
    [kb] = ws.kb_list()["KnowledgeBases"]
    assert kb["missing_index_ids"] == [ids["policies"]]
    assert scope.load_scope(ws.ctx, "bot").readable == {ids["runbooks"]}
    # a new index that reuses the name is not silently bound
    ws.document_index("CREATE_INDEX", index_name="policies")
    assert scope.load_scope(ws.ctx, "bot").readable == {ids["runbooks"]}


def test_usage_records_each_query_embedding(ws: Any) -> None:
    _setup(ws)
    ws.kb_create("ops", ["runbooks"])
    ws.agent_assign("bot", ["ops"])
    assert ws.build_embeddings()["Success"]
    for q in ("rotate keys", "signing quarter", "rotate keys"):  # the repeat is served from the query cache
        res = ws.search_index(q, mode="hybrid", agent_id="bot")
        assert res["Success"] and res["mode"] == "hybrid", res
    assert ws.search_index("keys", mode="keyword", agent_id="bot")["Success"]  # no embedding: counted as 0
    ws.search_index("operator query", mode="hybrid")  # the operator's searches are not an agent's spend
    usage = ws.agent_usage("bot")
    assert usage["Success"] and usage["embedding_events"] == 4
    assert usage["embeddings"] == 2
    assert usage["tokens"] >= 4
    recent = usage["Recent"]  # newest first
    assert [e["count"] for e in recent] == [0, 0, 1, 1]
    assert recent[0]["data"]["mode"] == "keyword" and recent[-1]["data"]["identities"]
    assert all(e["duration_ms"] >= 0 for e in recent)
    assert ws.agent_usage("nobody")["code"] == "not_found"


def test_cli_kb_and_agent(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITKB_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("GITKB_EMBEDDING_MODEL", "hashing-384")
    r = CliRunner()

    def gitkb(*args: str) -> Any:
        return r.invoke(cli, ["--home", str(home), *args], catch_exceptions=False)

    for name in ("a", "b"):
        assert gitkb("index", "create", name).exit_code == 0
    out = gitkb("kb", "create", "ops", "--index", "a", "--index", "b")
    assert out.exit_code == 0 and "created with 2 index(es)" in out.output
    dup = gitkb("kb", "create", "x", "--index", "a", "--index", "a")
    assert dup.exit_code == 1 and "listed twice" in dup.output
    listed = gitkb("kb", "list")
    assert "ops" in listed.output and "a, b" in listed.output
    assigned = gitkb("agent", "assign", "bot", "ops", "--read-only")
    assert assigned.exit_code == 0 and "mode read" in assigned.output
    assert "read" in gitkb("agent", "show", "bot").output.split("mode", 1)[1]
    proposing = gitkb("agent", "assign", "bot", "ops")  # the default mode is propose
    assert proposing.exit_code == 0 and "mode propose" in proposing.output
    assert gitkb("agent", "assign", "bot", "ops", "--mode", "write").exit_code == 0
    assert gitkb("agent", "assign", "bot", "ops", "--mode", "admin").exit_code == 2  # agents never get more
    assert "no query embeddings" in gitkb("agent", "usage", "bot").output
    assert gitkb("kb", "delete", "ops", "--yes").exit_code == 1
    assert gitkb("kb", "delete", "ops", "--force", "--yes").exit_code == 0
    assert gitkb("agent", "show", "nobody").exit_code == 1
