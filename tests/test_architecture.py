"""Imports point down only: interfaces -> services -> forges -> stores -> core (and down the order
of the services subpackages, SERVICES_ORDER).

Every module is parsed with ``ast`` (imports inside functions count too), and
importing the CLI must not load the heavy libraries (they load lazily).
"""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src" / "gitkb"

LEVEL = {"core": 0, "stores": 1, "forges": 2, "services": 3, "http": 4, "mcp": 4, "cli": 4, "workspace": 4}
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


def upward_imports(src: Path) -> list[str]:
    """Imports (anywhere in a module) of a higher layer: services may use forges, forges never services."""
    bad = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src.parent).with_suffix("")
        me = _layer(".".join(rel.parts))
        if me is None:
            continue
        for target in _imports(path):
            other = _layer(target)
            if other is not None and LEVEL[other] > LEVEL[me]:
                bad.append(f"{rel}: imports {target}")
    return bad


def test_no_upward_imports() -> None:
    bad = upward_imports(SRC)
    assert bad == [], "\n".join(bad)


def test_upward_import_check_sees_them(tmp_path: Path) -> None:
    src = tmp_path / "gitkb"
    for layer in ("forges", "services", "stores"):
        (src / layer).mkdir(parents=True)
    (src / "forges" / "a.py").write_text("def f():\n    from gitkb.services.changes import review\n")
    (src / "services" / "b.py").write_text("from gitkb.forges import registry\n")
    (src / "stores" / "c.py").write_text("import gitkb.workspace\n")
    assert upward_imports(src) == [
        "gitkb/forges/a: imports gitkb.services.changes",
        "gitkb/stores/c: imports gitkb.workspace",
    ]


def test_cli_import_stays_light() -> None:
    code = f"import sys, gitkb.cli.main; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"importing gitkb.cli loads {out}"


def _says_why(comment: str) -> bool:
    """A comment that gives a reason, not only a pragma for a linter."""
    text = comment.lstrip("#").strip()
    return bool(text) and not text.startswith(("noqa", "type: ignore", "pragma", "fmt:"))


def lazy_imports_without_reason(source: str, where: str) -> list[str]:
    """Imports inside a function (at any depth) with no comment on their lines saying why they are
    there and not at the module top (``# heavy: chromadb``, ``# cycle: a -> b``, ``# optional provider``)."""
    commented = {
        tok.start[0]
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT and _says_why(tok.string)
    }
    bad = set()
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                if not set(range(node.lineno, (node.end_lineno or node.lineno) + 1)) & commented:
                    bad.add((node.lineno, f"{where}:{node.lineno}: {ast.unparse(node)}"))
    return [b for _, b in sorted(bad)]


def test_every_import_inside_a_function_says_why() -> None:
    """An import inside a function either moves to the module top or says on its line why it can't
    (a heavy library kept off the CLI's start, a cycle, an optional provider)."""
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        bad.extend(lazy_imports_without_reason(path.read_text("utf-8"), str(path.relative_to(SRC))))
    assert bad == [], f"{len(bad)} imports inside functions without a reason:\n" + "\n".join(bad)


def test_lazy_import_check_sees_them() -> None:
    src = (
        "import os\n"
        "def f():\n"
        "    import json\n"
        "    from a import b  # noqa: F401\n"
        "    from c import (  # heavy: c\n"
        "        d,\n"
        "    )\n"
        "    from e import (\n"
        "        g,\n"
        "    )  # cycle: e -> here\n"
        "    def inner():\n"
        "        import h\n"
        "    import i  # optional provider\n"
    )
    assert lazy_imports_without_reason(src, "x") == [
        "x:3: import json",
        "x:4: from a import b",
        "x:12: import h",
    ]


SQL_CALLS = {"execute", "executemany", "executescript"}
SQL_WORDS = ("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "WITH", "PRAGMA")


def _is_sql(text: str) -> bool:
    words = text.lstrip().split(None, 1)
    return bool(words) and words[0].isupper() and words[0].rstrip("(") in SQL_WORDS


def _sql_in(source: str, where: str) -> list[str]:
    """The SQL calls (``x.execute(...)`` and friends) and SQL strings (plain or f-) in ``source``."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in SQL_CALLS
        ):
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
    assert _sql_in("q = f'SELECT {cols} FROM t'", "x") and _sql_in(
        "q = '  WITH a AS (SELECT 1) SELECT 1'", "x"
    )
    assert _sql_in("q = 'DELETE FROM t'", "x") and _sql_in("q = 'PRAGMA foreign_keys=ON'", "x")
    assert _sql_in("_execute(ctx)", "x") == [] and _sql_in("m = 'Update the index first'", "x") == []


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """A module's statements that run at import: its body and the bodies of its top-level if/try/with."""
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.If | ast.With):
            out.extend(_top_level(node.body + getattr(node, "orelse", [])))
        elif isinstance(node, ast.Try):
            out.extend(_top_level(node.body + node.orelse + node.finalbody))
            for handler in node.handlers:
                out.extend(_top_level(handler.body))
    return out


def import_side_effects(src: Path) -> list[str]:
    """Module-level imports kept only for their effect (``# noqa: F401``), module-level calls made
    for their effect (``register_kind(...)``, ``_register()``) and definitions behind a call
    (``if has("method"):`` around a route) under services/ and http/."""
    bad = []
    for layer in ("services", "http"):
        for path in sorted((src / layer).rglob("*.py")):
            text = path.read_text("utf-8")
            lines = text.splitlines()
            rel = path.relative_to(src.parent)
            for node in _top_level(ast.parse(text).body):
                span = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                if isinstance(node, ast.Import | ast.ImportFrom) and "noqa: F401" in span:
                    bad.append(
                        f"{rel}:{node.lineno}: an import that exists to register something: {span.strip()}"
                    )
                elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                    bad.append(f"{rel}:{node.lineno}: a call at import time: {ast.unparse(node)[:80]}")
                elif isinstance(node, ast.If) and isinstance(node.test, ast.Call):
                    bad.append(
                        f"{rel}:{node.lineno}: defined only if a call says so: if {ast.unparse(node.test)}"
                    )
    return bad


def test_nothing_registers_itself_at_import() -> None:
    """Job kinds, actions and routes come from explicit lists (``services/dispatch/job_kinds.JOB_KINDS``,
    the action table, the routers), loaded by the composition root; importing a module registers nothing."""
    bad = import_side_effects(SRC)
    assert bad == [], "\n".join(bad)


def test_job_kinds_are_one_literal_list() -> None:
    """Every job kind a Workspace can run is in ``JOB_KINDS``; no other module adds one."""
    from gitkb.services.dispatch.job_kinds import JOB_KINDS
    from gitkb.services.runtime import jobs

    assert set(JOB_KINDS) == {
        "action",
        "reindex",
        "build_embeddings",
        "reembed",
        "purge_expired",
        "verify_repair",
        "source_sync",
        "source_rollback",
    }
    assert all(isinstance(k, jobs.JobKind) for k in JOB_KINDS.values())
    callers = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                "add_kind",
                "load_kinds",
                "register_kind",
            ):
                callers.append(str(path.relative_to(SRC)))
    assert callers == ["workspace/__init__.py"], callers


def crash_log_writers(src: Path) -> list[str]:
    """Modules that write a traceback or the crash log themselves (``append_log``, ``format_exception``)."""
    out = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", None))
                if name in ("append_log", "format_exception", "print_exception", "format_exc", "print_exc"):
                    out.append(f"{path.relative_to(src)}:{node.lineno}: {name}")
    return out


def test_the_crash_log_is_written_in_one_place() -> None:
    """Workspace tools, MCP, HTTP and the CLI all write tracebacks through ``core.errors.write_crash_log``."""
    assert [w.split(":")[0] for w in crash_log_writers(SRC)] == ["core/errors.py", "core/errors.py"]


def success_envelopes(path: Path) -> list[int]:
    """Lines of ``path`` that build ``{"Success": True, ...}`` by hand."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if isinstance(node, ast.Dict)
        and any(
            isinstance(k, ast.Constant)
            and k.value == "Success"
            and isinstance(v, ast.Constant)
            and v.value is True
            for k, v in zip(node.keys, node.values, strict=True)
        )
    ]


def test_the_workspace_builds_the_success_envelope_once() -> None:
    """Only the ``tool`` decorator adds ``Success: True``; every method returns its service's dict as is."""
    found = {str(p.relative_to(SRC)): success_envelopes(p) for p in sorted((SRC / "workspace").glob("*.py"))}
    assert {k: len(v) for k, v in found.items() if v} == {"workspace/base.py": 1}
    assert (
        success_envelopes(SRC / "services" / "dispatch" / "scoped_search.py") == []
    )  # what the Workspace returns unchanged


def test_every_answer_starts_with_success(ws: Any) -> None:
    """The envelope's key comes first, as it did when each method built it (JSON output keeps the order)."""
    for answer in (
        ws.get_index_status(),
        ws.kb_list(),
        ws.list_jobs(),
        ws.embeddings_status(),
        ws.document_index("LIST_INDICES"),
        ws.search_index("anything"),
        ws.cancel_job("job_nope"),
    ):
        assert next(iter(answer)) == "Success", answer


def _runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The gitkb modules ``path`` imports when it runs (inside functions too; not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text("utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                target = sub if sub in modules else node.module
                if target in modules:
                    out.add(target)
    return out


def _module_graph() -> dict[str, set[str]]:
    paths = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        paths[name] = path
    names = set(paths)
    return {m: _runtime_imports(p, names) - {m} for m, p in paths.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_import_cycles() -> None:
    """No circle of imports, counting the imports inside functions (a lazy import hides a cycle, it
    does not remove it); imports under ``if TYPE_CHECKING:`` never run and do not count."""
    cycles = _cycles(_module_graph())
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


def _with_packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` plus what Python does first when it imports ``a.b.c``: it runs ``a/b/__init__.py``
    (a module's own packages are already being imported and add nothing)."""
    out = {}
    for m, deps in graph.items():
        parents = set()
        for d in deps:
            parts = d.split(".")
            parents |= {".".join(parts[:i]) for i in range(1, len(parts))}
        out[m] = (deps | {p for p in parents if p in graph and not m.startswith(p + ".")}) - {m}
    return out


def test_package_inits_add_no_cycle() -> None:
    """Counting what importing a package runs first (its ``__init__.py``), there is still no circle:
    a package ``__init__`` re-exports nothing that imports back into it."""
    cycles = _cycles(_with_packages(_module_graph()))
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)
    assert _with_packages({"p.a": {"q.b"}, "q": {"p.c"}, "q.b": set(), "p": set(), "p.c": {"p.a"}}) == {
        "p.a": {"q.b", "q"},
        "q": {"p.c", "p"},
        "q.b": set(),
        "p": set(),
        "p.c": {"p.a"},
    }


def test_cycle_check_sees_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# The subpackages of services/, lowest first: a module imports only from its own unit or one before it.
# ``context`` is the one shared module at services/ level (settings, stores, locks; a leaf).
SERVICES_ORDER = [
    "context",
    "access",
    "derived",
    "runtime",
    "retrieval",
    "indexing",
    "changes",
    "operations",
    "evaluation",
    "dispatch",
]


def _service_unit(module: str) -> str | None:
    """``gitkb.services.derived.catchup`` -> ``derived``; None outside services (or services itself)."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["gitkb", "services"] and len(parts) > 2 else None


def service_order_violations(src: Path, order: list[str]) -> list[str]:
    """Imports under ``src/services`` (at module level, inside functions, under TYPE_CHECKING) that point
    at a later unit of ``order``, and modules in a unit ``order`` does not name."""
    bad = []
    for path in sorted((src / "services").rglob("*.py")):
        parts = path.relative_to(src.parent).with_suffix("").parts
        me = _service_unit(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        if me is None:
            continue
        if me not in order:
            bad.append(f"{path.relative_to(src)}: {me!r} is not in the order")
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                other = _service_unit(target)
                if other in order and order.index(other) > order.index(me):
                    bad.append(f"{path.relative_to(src)}:{node.lineno}: {me} imports {target} ({other})")
    return bad


def test_services_import_down_their_order() -> None:
    """A newcomer reads services/ bottom-up: ``SERVICES_ORDER`` is the order, and no import goes up it."""
    bad = service_order_violations(SRC, SERVICES_ORDER)
    assert bad == [], "\n".join(bad)
    units = {p.name.removesuffix(".py") for p in (SRC / "services").iterdir() if p.name != "__init__.py"}
    assert units - {"__pycache__"} == set(SERVICES_ORDER)


def test_service_order_check_sees_violations(tmp_path: Path) -> None:
    src = tmp_path / "gitkb"
    (src / "services" / "low").mkdir(parents=True)
    (src / "services" / "high").mkdir()
    (src / "services" / "low" / "a.py").write_text(
        "from gitkb.services.low import b\n"
        "def f():\n"
        "    from gitkb.services.high import c  # late\n"
        "    import gitkb.services.high.d\n"
    )
    (src / "services" / "high" / "c.py").write_text("from gitkb.services.low.a import f\n")
    (src / "services" / "odd.py").write_text("from gitkb.services import low\n")
    assert service_order_violations(src, ["low", "high"]) == [
        "services/low/a.py:3: low imports gitkb.services.high.c (high)",
        "services/low/a.py:4: low imports gitkb.services.high.d (high)",
        "services/odd.py: 'odd' is not in the order",
    ]
