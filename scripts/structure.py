"""Print the structure figures of a source tree: modules, imports inside functions, import cycles,
module and function sizes, and ``Any`` parameters in services/ (issue 16's before/after table).

    .venv/bin/python scripts/structure.py [SRC]      # SRC defaults to src/gitkb
"""

from __future__ import annotations

import ast
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import test_architecture as arch  # noqa: E402 - the cycle finder the architecture test uses
import test_sizes  # noqa: E402 - the line counts the size test uses


def main() -> None:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "src/gitkb").resolve()
    arch.SRC = src
    files = sorted(src.rglob("*.py"))
    sizes = sorted(len(p.read_text("utf-8").splitlines()) for p in files)
    inner = anys = 0
    for p in files:
        tree = ast.parse(p.read_text("utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.ImportFrom)
                    and (node.module or "").startswith("gitkb")
                    or isinstance(node, ast.Import)
                    and any(a.name.startswith("gitkb") for a in node.names)
                ):
                    inner += 1
            if "services" in p.relative_to(src).parts:
                args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
                anys += sum(
                    1 for a in args if a.annotation is not None and ast.unparse(a.annotation) == "Any"
                )
    cycles = arch._cycles(arch._module_graph())
    print(f"modules {len(files)}; gitkb imports inside functions {inner} (nested ones counted per function)")
    print(f"import cycles {len(cycles)} {[len(c) for c in cycles]}")
    print(
        f"module lines: median {statistics.median(sizes):.0f}, largest {sizes[-1]}, over 400: {sum(s > 400 for s in sizes)}"
    )
    sizes = test_sizes.measure(src)
    long_modules, long_functions = sizes.long_modules(), sizes.long_functions()
    print(
        f"modules over {test_sizes.MAX_MODULE_LINES} lines, declarative tables aside: {len(long_modules)}"
        f" {sorted(long_modules.values(), reverse=True)}"
    )
    longest = max(sizes.long_functions(0).items(), key=lambda item: item[1], default=("-", 0))
    print(
        f"functions over {test_sizes.MAX_FUNCTION_LINES} lines, migrations aside: {len(long_functions)}"
        f" {sorted(long_functions.values(), reverse=True)}; longest {longest[1]} ({longest[0]})"
    )
    print(f"Any-typed parameters in services/: {anys}")


if __name__ == "__main__":
    main()
