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



SQL_CALLS = {"execute", "executemany", "executescript"}
SQL_WORDS = ("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "WITH", "PRAGMA")


def _is_sql(text: str) -> bool:
    words = text.lstrip().split(None, 1)
    return bool(words) and words[0].isupper() and words[0].rstrip("(") in SQL_WORDS


def _sql_in(source: str, where: str) -> list[str]:
    """The SQL calls (``x.execute(...)`` and friends) and SQL strings (plain or f-) in ``source``."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_CALLS:
            bad.append(f"{where}:{node.lineno}: .{node.func.attr}(...)")
        elif isinstance(node, ast.JoinedStr) and node.values:
            head = node.values[0]
            if isinstance(head, ast.Constant) and isinstance(head.value, str) and _is_sql(head.value):
                bad.append(f"{where}:{node.lineno}: SQL f-string")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _is_sql(node.value):
            bad.append(f"{where}:{node.lineno}: SQL string {node.value[:40]!r}")
    return sorted(bad, key=lambda s: int(s.split(":")[1]))


def _sql_outside_stores() -> list[str]:
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] != "stores":
            bad.extend(_sql_in(path.read_text("utf-8"), str(rel)))
    return bad


def test_sql_only_in_stores() -> None:
    """SQL lives in ``stores/``: services and interfaces call a named store function instead."""
    bad = _sql_outside_stores()
    assert bad == [], f"{len(bad)} SQL calls/strings outside stores/:\n" + "\n".join(bad)


def test_sql_check_sees_sql() -> None:
    """The check above is not blind: it finds each form it looks for, and only those."""
    assert len(_sql_in("conn.execute('SELECT 1')", "x")) == 2  # the call and the string
    assert _sql_in("w.executemany(q, rows)", "x") and _sql_in("c.executescript(q)", "x")
    assert _sql_in("q = f'SELECT {cols} FROM t'", "x") and _sql_in("q = '  WITH a AS (SELECT 1) SELECT 1'", "x")
    assert _sql_in("q = 'DELETE FROM t'", "x") and _sql_in("q = 'PRAGMA foreign_keys=ON'", "x")
    assert _sql_in("_execute(ctx)", "x") == [] and _sql_in("m = 'Update the index first'", "x") == []
