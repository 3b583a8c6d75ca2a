"""The MCP tool contract: every tool's name, parameter schema and annotations, pinned.

A change here is a change of what agents see: update the pin on purpose.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from gitkb.mcp import build_server
from gitkb.mcp.server import available

S = {"type": "string"}
NAME = {"type": "string", "minLength": 1, "maxLength": 128}
INDEXES = {"type": "array", "items": NAME, "maxItems": 100}
QUERY = {"type": "string", "minLength": 1, "maxLength": 4000}
TIERS = {"type": "array", "items": {"enum": ["hot", "warm", "cold"]}, "maxItems": 3}
MODE = {"enum": ["keyword", "semantic", "hybrid"]}
BOOL = {"type": "boolean"}
SOURCE = {"type": "string", "minLength": 1, "maxLength": 200}

# name -> (required, properties without descriptions, (readOnly, destructive, idempotent, openWorld))
# name -> (required, properties without descriptions, (readOnly, destructive, idempotent, openWorld))
# for the operator's session (every tool); an agent sees a subset (test_agent_modes_offer_only_their_tools).
PATH = {"type": "string", "minLength": 1, "maxLength": 1024}
ID = {"type": "string", "minLength": 1, "maxLength": 100}
CONTRACT: dict[str, tuple[list[str], dict[str, Any], tuple[bool, bool, bool, bool]]] = {
    "document_index": (
        ["action"],
        {
            "action": {
                "enum": [
                    "ADD_DOCUMENTS",
                    "ADD_TEXT",
                    "ASK",
                    "CREATE_INDEX",
                    "DELETE_DOCUMENT",
                    "DELETE_INDEX",
                    "GET_DOCUMENT",
                    "GET_INDICES_STATS",
                    "GET_SEARCH_SETTINGS",
                    "LIST_DOCUMENTS",
                    "LIST_INDICES",
                    "RECHUNK",
                    "RENAME_DOCUMENT",
                    "RENAME_INDEX",
                    "SEARCH",
                    "SET_SEARCH_SETTINGS",
                ]
            },
            "answer_mode": {"enum": ["extractive", "generative"]},
            "base_path": PATH,
            "chunk_overlap": {"type": "integer", "minimum": 0},
            "chunk_size": {"type": "integer", "minimum": 1},
            "chunk_strategy": {"enum": ["auto", "sentence", "one_chunk_per_doc"]},
            "count": {
                "type": "integer"
            },  # 1-50 for LIST_DOCUMENTS, 0-10 MiB for GET_DOCUMENT: the policy checks each
            "embeddings": BOOL,
            "embedding_model": S,
            "embedding_provider": S,
            "file_id": ID,
            "filepath": PATH,
            "index_name": NAME,
            "indexes": INDEXES,
            "metadata": {"type": "object"},
            "mode": MODE,
            "new_filename": PATH,
            "new_index_name": NAME,
            "pagination_mode": {"enum": ["lines", "chars", "chunks"]},
            "path_filter": S,
            "query": S,
            "reset": BOOL,
            "settings": {"type": "object"},
            "show_files_only": BOOL,
            "start": {"type": "integer", "minimum": 0},
            "tenant": S,
            "text": S,
            "tier": {"enum": ["hot", "warm", "cold"]},
            "tiers": TIERS,
            "top_n": {"type": "integer", "minimum": 1, "maximum": 100},
            "ttl_seconds": {"type": "number", "exclusiveMinimum": 0},
        },
        (False, True, False, False),
    ),
    "search_index": (
        ["query"],
        {
            "query": QUERY,
            "indexes": INDEXES,
            "top_n": {"type": "integer", "minimum": 1, "maximum": 50},
            "tenant": S,
            "tiers": TIERS,
            "mode": MODE,
        },
        (True, False, True, False),
    ),
    "get_index_status": ([], {}, (True, False, True, False)),
    "embeddings_status": ([], {}, (True, False, True, False)),
    "reindex": ([], {"force": BOOL, "index_name": NAME}, (False, False, True, False)),
    "build_embeddings": ([], {"force": BOOL}, (False, False, True, False)),
    "get_job_result": (["job_id"], {"job_id": ID}, (True, False, True, False)),
    "cite_check": (["chunk_id"], {"chunk_id": ID}, (True, False, True, False)),
    "propose_kb_edit": (
        ["source_id_or_index", "relative_path"],
        {
            "source_id_or_index": SOURCE,
            "relative_path": PATH,
            "content": S,
            "search": S,
            "replace": S,
            "note": {"type": "string", "maxLength": 4000},
        },
        (False, False, False, False),
    ),
    "propose_kb_delete": (
        ["source_id_or_index", "relative_path"],
        {"source_id_or_index": SOURCE, "relative_path": PATH, "note": {"type": "string", "maxLength": 4000}},
        (False, False, False, False),
    ),
    "propose_kb_rename": (
        ["source_id_or_index", "relative_path", "new_relative_path"],
        {
            "source_id_or_index": SOURCE,
            "relative_path": PATH,
            "new_relative_path": PATH,
            "note": {"type": "string", "maxLength": 4000},
        },
        (False, False, False, False),
    ),
    "open_kb_pull_request": (
        ["source_id_or_index"],
        {
            "source_id_or_index": SOURCE,
            "target_index": NAME,
            "title": {"type": "string", "maxLength": 300},
            "body": {"type": "string", "maxLength": 20000},
            "commit_message": {"type": "string", "maxLength": 4000},
            "proposal_ids": {"type": "array", "items": ID, "minItems": 1, "maxItems": 100},
        },
        (False, False, True, True),
    ),
    "refresh_proposals": (["source"], {"source": SOURCE}, (False, False, True, False)),
    "list_knowledge_bases": ([], {}, (True, False, True, False)),
}


def _strip(props: dict[str, Any]) -> dict[str, Any]:
    return {k: {kk: vv for kk, vv in v.items() if kk != "description"} for k, v in props.items()}


def _operator_specs(ws: Any) -> dict[str, Any]:
    return {spec.name: spec for spec, _ in available(ws)}


def test_every_tool_is_pinned_in_order(ws: Any) -> None:
    assert list(_operator_specs(ws)) == list(CONTRACT)


@pytest.mark.parametrize("name", list(CONTRACT))
def test_tool_schema_and_annotations(ws: Any, name: str) -> None:
    spec = _operator_specs(ws)[name]
    required, props, hints = CONTRACT[name]
    schema = spec.input_schema
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == required
    assert _strip(schema["properties"]) == props
    assert all(p.get("description") for p in schema["properties"].values()), "every parameter is described"
    h = spec.hints
    assert (h.read_only, h.destructive, h.idempotent, h.open_world) == hints
    assert "Success false" in spec.description and "next_steps" in spec.description
    assert "Next" in spec.description  # says what to do next


def test_document_index_covers_every_action_parameter(ws: Any) -> None:
    from gitkb.core.action_table import ACTIONS, DOCUMENT_INDEX_NAMES

    spec = _operator_specs(ws)["document_index"]
    wanted = {p.name for n in DOCUMENT_INDEX_NAMES for p in ACTIONS[n].wire_params}
    assert set(spec.input_schema["properties"]) == wanted | {"action"}
    for name in DOCUMENT_INDEX_NAMES:
        assert f"- {name}(" in spec.description


def test_listed_tools_match_the_pins(ws: Any) -> None:
    """What a client sees over the protocol is the pinned contract."""

    async def main() -> list[Any]:
        async with Client(build_server(ws)) as client:
            return list((await client.list_tools()).tools)

    listed = anyio.run(main)
    assert [t.name for t in listed] == list(CONTRACT)
    for t in listed:
        required, props, hints = CONTRACT[t.name]
        assert _strip(t.input_schema["properties"]) == props
        assert t.input_schema.get("required", []) == required
        a = t.annotations
        assert a is not None
        assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == hints


READ_TOOLS = {
    "document_index",
    "search_index",
    "get_index_status",
    "embeddings_status",
    "get_job_result",
    "cite_check",
    "list_knowledge_bases",
}
PROPOSE_TOOLS = READ_TOOLS | {
    "propose_kb_edit",
    "propose_kb_delete",
    "propose_kb_rename",
    "open_kb_pull_request",
    "refresh_proposals",
}
READ_ACTIONS = [
    "ASK",
    "GET_DOCUMENT",
    "GET_INDICES_STATS",
    "GET_SEARCH_SETTINGS",
    "LIST_DOCUMENTS",
    "LIST_INDICES",
    "SEARCH",
]


@pytest.mark.parametrize(
    ("mode", "tools_wanted", "actions_wanted"),
    [
        ("read", READ_TOOLS, READ_ACTIONS),
        ("propose", PROPOSE_TOOLS, READ_ACTIONS),
        ("write", PROPOSE_TOOLS, sorted([*READ_ACTIONS, "ADD_TEXT", "DELETE_DOCUMENT", "RENAME_DOCUMENT"])),
    ],
)
def test_agent_modes_offer_only_their_tools(
    ws: Any, mode: str, tools_wanted: set[str], actions_wanted: list[str]
) -> None:
    """An agent is offered only what its binding mode allows, and never operate/review/admin tools;
    no description names a tool it is not offered."""
    assert ws.document_index("CREATE_INDEX", index_name="kb")["Success"]
    assert ws.kb_create("k", ["kb"])["Success"]
    assert ws.agent_assign("bot", ["k"], mode=mode)["Success"]

    async def main() -> list[Any]:
        async with Client(build_server(ws, "bot")) as client:
            return list((await client.list_tools()).tools)

    listed = {t.name: t for t in anyio.run(main)}
    assert set(listed) == tools_wanted
    assert listed["document_index"].input_schema["properties"]["action"]["enum"] == actions_wanted
    for t in listed.values():
        for other in set(CONTRACT) - set(listed):
            assert other not in (t.description or ""), (t.name, other)
