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
