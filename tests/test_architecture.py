"""Imports point down only: interfaces -> services/forges -> stores -> core.

Every module is parsed with ``ast`` (imports inside functions count too), and
importing the CLI must not load the heavy libraries (they load lazily).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gitkb"

LEVEL = {"core": 0, "stores": 1, "forges": 2, "services": 2, "http": 3, "mcp": 3, "cli": 3, "workspace": 3}
HEAVY = ("chromadb", "onnxruntime", "fastembed", "tantivy", "pygit2", "fastapi", "mcp", "github3", "gitlab")


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "gitkb" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LEVEL else None


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text("utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


def test_no_upward_imports() -> None:
    bad = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        me = _layer(".".join(rel.parts))
        if me is None:
            continue
        for target in _imports(path):
            other = _layer(target)
            if other is not None and LEVEL[other] > LEVEL[me]:
                bad.append(f"{rel}: imports {target}")
    assert bad == [], "\n".join(bad)


def test_cli_import_stays_light() -> None:
    code = f"import sys, gitkb.cli.main; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"importing gitkb.cli loads {out}"
