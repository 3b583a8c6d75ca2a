"""The wheel installs anywhere: built from a clean copy of the repository (``pip wheel . --no-deps``),
it holds the tokenizer files, templates, static files, schemas and hooks; installed into a fresh
virtual environment (dependencies from the package index, pip's cache reused), it runs the README
quickstart's three steps (scripts/quickstart) from a directory outside the repository; then the
same wheel installed with ``pipx install`` runs them again.

Slow (about 90 s with a warm pip cache): CI runs it (``scripts/test`` selects no marker), ``-m 'not
slow'`` skips it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# What the package reads at run time besides its modules (pyproject's package-data).
DATA_FILES = [
    "gitkb/core/data/tokenizer.json",
    "gitkb/core/data/tokenizer_config.json",
    "gitkb/core/data/special_tokens_map.json",
    "gitkb/schemas/gitkb.schema.json",
    "gitkb/schemas/kb-manifest.schema.json",
    "gitkb/hooks/pre-commit",
    "gitkb/hooks/reference-transaction",
]
DATA_DIRS = ["gitkb/http/templates/", "gitkb/http/static/"]
SKIP = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".gitkb*", "bench"
)


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def quickstart_steps() -> list[list[str]]:
    """The three ``gitkb`` lines of scripts/quickstart, the README's quickstart."""
    steps = []
    for line in (REPO / "scripts" / "quickstart").read_text("utf-8").splitlines():
        if line.startswith("gitkb ") and "()" not in line:
            steps.append(shlex.split(line)[1:])
    return steps


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_wheel_installs_in_a_fresh_venv_and_runs_the_quickstart(tmp_path: Path) -> None:
    steps = quickstart_steps()
    assert [s[0] for s in steps] == ["index", "add", "search"], steps
    src = tmp_path / "src"
    shutil.copytree(REPO, src, symlinks=True, ignore=SKIP)  # a clean tree: no stale build/ leaks in
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITKB_", "VIRTUAL_ENV", "PYTHONPATH"))}
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", str(dist)], src, env)
    (wheel,) = dist.glob("gitkb-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [f for f in DATA_FILES if f not in names] == []
    for d in DATA_DIRS:
        assert any(n.startswith(d) and n.endswith((".html", ".css", ".js")) for n in names), d

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    py = venv / "bin" / "python"
    run([str(py), "-m", "pip", "install", "-q", "--no-compile", str(wheel)], tmp_path, env, timeout=600)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copytree(REPO / "example_kb_repo", elsewhere / "example_kb_repo")
    env = {**env, "GITKB_HOME": str(elsewhere / "home"), "HF_HUB_OFFLINE": "1"}
    where = run(
        [str(py), "-c", "import gitkb, pathlib; print(pathlib.Path(gitkb.__file__).parent)"], elsewhere, env
    )
    assert str(venv) in where and str(REPO) not in where, where
    gitkb = str(venv / "bin" / "gitkb")
    outputs = [run([gitkb, *step], elsewhere, env) for step in steps]
    assert "created" in outputs[0]
    assert "6 added" in outputs[1] and "embedded" in outputs[1], outputs[1]
    assert "[1] Database failover" in outputs[2] and "semantic" in outputs[2], outputs[2]

    # pipx: the same wheel as an application (its own venv under PIPX_HOME, the command in
    # PIPX_BIN_DIR), the quickstart again from the same directory on a fresh home.
    run([str(py), "-m", "pip", "install", "-q", "pipx"], tmp_path, env, timeout=600)
    pipx_env = {
        **env,
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "pipx-bin"),
        "PIPX_MAN_DIR": str(tmp_path / "pipx-man"),
        "GITKB_HOME": str(elsewhere / "home-pipx"),
    }
    run([str(venv / "bin" / "pipx"), "install", str(wheel)], tmp_path, pipx_env, timeout=600)
    app = str(tmp_path / "pipx-bin" / "gitkb")
    outputs = [run([app, *step], elsewhere, pipx_env) for step in steps]
    assert "6 added" in outputs[1] and "embedded" in outputs[1], outputs[1]
    assert "[1] Database failover" in outputs[2], outputs[2]
