"""The agent's limit of search results is one constant (``core.action_table.MAX_TOP_K``), and
what the HTTP API documents about ``top_n`` is what it does."""

from __future__ import annotations

import ast
from pathlib import Path

from gitkb.core import action_table as table

SRC = Path(__file__).resolve().parents[1] / "src" / "gitkb"


def _assigned(name: str) -> list[str]:
    """The modules under src/gitkb that assign ``name`` at module level (an import is not one)."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                out.append(str(path.relative_to(SRC)))
    return out


def test_the_agent_limit_is_declared_once() -> None:
    """Before: ``MAX_TOP_K = 50`` in core/action_table.py and services/access/knowledge.py, and
    ``MAX_TOP_K = knowledge.MAX_TOP_K`` in services/dispatch/scope.py."""
    assert _assigned("MAX_TOP_K") == ["core/action_table.py"]
    assert table.MAX_TOP_K == 50
