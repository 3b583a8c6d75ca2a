"""The MCP tool contract: every tool's name, parameter schema and annotations, pinned.

A change here is a change of what agents see: update the pin on purpose.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from gitkb.mcp import build_server, tools
from gitkb.mcp.server import available
from gitkb.services import scope

S = {"type": "string"}
NAME = {"type": "string", "minLength": 1, "maxLength": 128}
INDEXES = {"type": "array", "items": NAME, "maxItems": 100}
QUERY = {"type": "string", "minLength": 1, "maxLength": 4000}
TIERS = {"type": "array", "items": {"enum": ["hot", "warm", "cold"]}, "maxItems": 3}
MODE = {"enum": ["keyword", "semantic", "hybrid"]}
BOOL = {"type": "boolean"}
SOURCE = {"type": "string", "minLength": 1, "maxLength": 200}

# name -> (required, properties without descriptions, (readOnly, destructive, idempotent, openWorld))
CONTRACT: dict[str, tuple[list[str], dict[str, Any], tuple[bool, bool, bool, bool]]] = {
    "document_index": (
        ["action"],
        {
            "action": {"enum": [
                "ADD_DOCUMENTS", "ADD_TEXT", "ASK", "CREATE_INDEX", "DELETE_DOCUMENT", "DELETE_INDEX",
                "GET_DOCUMENT", "GET_INDICES_STATS", "GET_SEARCH_SETTINGS", "LIST_DOCUMENTS", "LIST_INDICES", "RECHUNK",
                "RENAME_DOCUMENT", "RENAME_INDEX", "SEARCH", "SET_SEARCH_SETTINGS",
            ]},
            "answer_mode": {"enum": ["extractive", "generative"]},
            "base_path": S,
            "chunk_overlap": {"type": "integer", "minimum": 0},
            "chunk_size": {"type": "integer", "minimum": 1},
            "chunk_strategy": S,
            "count": {"type": "integer", "minimum": 0},
            "embeddings": BOOL,
            "embedding_model": S,
            "embedding_provider": S,
            "file_id": S,
            "filepath": S,
            "index_name": NAME,
            "indexes": INDEXES,
            "metadata": {"type": "object"},
            "mode": MODE,
            "new_filename": S,
            "new_index_name": NAME,
            "pagination_mode": {"enum": ["lines", "chars", "chunks"]},
            "path_filter": S,
            "query": QUERY,
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
            "top_k": {"type": "integer", "minimum": 1, "maximum": 50},
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
    "get_job_result": (["job_id"], {"job_id": {"type": "string", "minLength": 1, "maxLength": 100}}, (True, False, True, False)),
    "propose_kb_edit": (
        ["source_id_or_index", "relative_path"],
        {
            "source_id_or_index": SOURCE,
            "relative_path": {"type": "string", "minLength": 1, "maxLength": 1024},
            "content": S,
            "search": S,
            "replace": S,
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
        },
        (False, False, True, True),
    ),
    "list_knowledge_bases": ([], {}, (True, False, True, False)),
}


def _strip(props: dict[str, Any]) -> dict[str, Any]:
    return {k: {kk: vv for kk, vv in v.items() if kk != "description"} for k, v in props.items()}


def test_every_tool_is_pinned_in_order() -> None:
    assert [spec.name for spec, _ in tools.specs()] == list(CONTRACT)


@pytest.mark.parametrize("name", list(CONTRACT))
def test_tool_schema_and_annotations(name: str) -> None:
    spec = next(s for s, _ in tools.specs() if s.name == name)
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


def test_document_index_covers_every_action_parameter() -> None:
    from gitkb.services import actions

    spec = next(s for s, _ in tools.specs() if s.name == "document_index")
    wanted = {p for _, allowed in actions.ACTIONS.values() for p in allowed} - {"progress"}
    assert set(spec.input_schema["properties"]) == wanted | {"action"}
    for name in actions.ACTIONS:
        assert f"- {name}(" in spec.description


def test_listed_tools_match_the_pins(ws: Any) -> None:
    """What a client sees over the protocol is the pinned contract (for the tools offered now)."""

    async def main() -> list[Any]:
        async with Client(build_server(ws)) as client:
            return list((await client.list_tools()).tools)

    listed = anyio.run(main)
    offered = [s.name for s, _ in available(ws, scope.load_scope(ws.ctx, None))]
    assert [t.name for t in listed] == offered
    assert {"document_index", "search_index", "get_index_status", "get_job_result", "reindex",
            "list_knowledge_bases"} <= set(offered)
    for t in listed:
        required, props, hints = CONTRACT[t.name]
        assert _strip(t.input_schema["properties"]) == props
        assert t.input_schema.get("required", []) == required
        a = t.annotations
        assert a is not None
        assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == hints


def test_offered_tools_follow_the_workspace(ws: Any) -> None:
    """A tool appears exactly when the Workspace method (and job kind) it translates onto exists."""
    from gitkb.services import jobs

    offered = {s.name for s, _ in available(ws, scope.load_scope(ws.ctx, None))}
    for name, method in tools.REQUIRES.items():
        has = callable(getattr(ws, method, None))
        kind = tools.REQUIRES_JOB_KIND.get(name)
        if kind is not None:
            has = has and kind in jobs.JOB_KINDS
        assert (name in offered) == has, name
