"""Tool specifications: name, description, JSON Schema of the arguments, annotations.

Every input schema is closed (``additionalProperties: false``) and arguments
are validated against it on the server before anything runs, so an unknown
argument, a wrong type (``"10"`` for an integer) or an out-of-range value is
refused with a tool result, never executed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from gitkb.services.retrieval.search import MAX_QUERY_CHARS, MAX_TOP_N
from gitkb.services.retrieval.tenancy import TIERS

STRING: dict[str, Any] = {"type": "string"}
INDEX_NAME: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 128}
QUERY: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS}
INDEX_LIST: dict[str, Any] = {"type": "array", "items": INDEX_NAME, "maxItems": 100}
TIER_LIST: dict[str, Any] = {"type": "array", "items": {"enum": list(TIERS)}, "maxItems": len(TIERS)}
SEARCH_MODE: dict[str, Any] = {"enum": ["keyword", "semantic", "hybrid"]}

# The JSON type of every action parameter document_index accepts (see services.dispatch.actions).
ACTION_PARAMS: dict[str, dict[str, Any]] = {
    "index_name": INDEX_NAME,
    "new_index_name": INDEX_NAME,
    "chunk_size": {"type": "integer", "minimum": 1},
    "chunk_overlap": {"type": "integer", "minimum": 0},
    "chunk_strategy": STRING,
    "embeddings": {"type": "boolean"},
    "embedding_provider": STRING,
    "embedding_model": STRING,
    "settings": {"type": "object"},
    "reset": {"type": "boolean"},
    "filepath": STRING,
    "base_path": STRING,
    "tenant": STRING,
    "tier": {"enum": list(TIERS)},
    "ttl_seconds": {"type": "number", "exclusiveMinimum": 0},
    "text": STRING,
    "metadata": {"type": "object"},
    "path_filter": STRING,
    "query": QUERY,
    "show_files_only": {"type": "boolean"},
    "start": {"type": "integer", "minimum": 0},
    "count": {"type": "integer", "minimum": 0},
    "file_id": STRING,
    "pagination_mode": {"enum": ["lines", "chars", "chunks"]},
    "new_filename": STRING,
    "indexes": INDEX_LIST,
    "top_n": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_N},
    "mode": SEARCH_MODE,
    "tiers": TIER_LIST,
    "answer_mode": {"enum": ["extractive", "generative"]},
}
HIDDEN_ACTION_PARAMS = frozenset({"progress"})  # in-process callbacks, not tool arguments


@dataclass(frozen=True)
class Param:
    name: str
    schema: dict[str, Any]
    description: str
    required: bool = False


@dataclass(frozen=True)
class Hints:
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool = False


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: tuple[Param, ...]
    hints: Hints
    carries_passages: bool = False  # the answer holds retrieved text: render it inside the data block
    input_schema: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        schema = {
            "type": "object",
            "properties": {p.name: {**p.schema, "description": p.description} for p in self.params},
            "required": [p.name for p in self.params if p.required],
            "additionalProperties": False,
        }
        object.__setattr__(self, "input_schema", schema)


def validation_errors(spec: ToolSpec, arguments: dict[str, Any]) -> list[str]:
    """Human-readable reasons the arguments break the tool's schema (empty when they fit)."""
    validator = Draft202012Validator(spec.input_schema)
    out = []
    for err in sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "arguments"
        msg = err.message if len(err.message) <= 300 else err.message[:300] + "..."
        out.append(f"{where}: {msg}")
    # jsonschema's "integer" admits 10.0; a tool's integers are strictly integers.
    for p in spec.params:
        v = arguments.get(p.name)
        if p.schema.get("type") == "integer" and isinstance(v, float):
            out.append(f"{p.name}: {v!r} is not an integer")
    return out


ToolFn = Callable[..., dict[str, Any]]
