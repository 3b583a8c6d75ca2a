"""The CLI never prints a Python traceback: exit 3 with one line and the log path (README).

Each case runs ``gitkb`` in a subprocess, the way an operator does, with a fault planted
through ``python -c`` (a patched function) where no real input reaches the path.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GITKB = str(Path(sys.executable).with_name("gitkb"))
TOML = '[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n'


def run(
    args: list[str],
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    code: str | None = None,
    encoding: str = "utf-8",
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", code, *args] if code else [GITKB, *args]
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, encoding=encoding, timeout=120, env={**os.environ, **(env or {})}
    )


def one_line_error(proc: subprocess.CompletedProcess[str], exit_code: int = 3) -> str:
    assert proc.returncode == exit_code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "ws"
    h.mkdir()
    (h / "gitkb.toml").write_text(TOML)
    return h


def test_a_removed_current_directory(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    code = (
        "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); sys.argv = ['gitkb', 'status'];"
        " from gitkb.cli.main import main; main(sys.argv[1:])"
    )
    proc = run([str(gone)], cwd=tmp_path, env={"GITKB_HOME": ""}, code=code)
    line = one_line_error(proc)
    assert line.startswith("error: unexpected FileNotFoundError") and "details in" in line


def test_an_internal_error_inside_a_job_is_logged_not_printed(home: Path) -> None:
    code = (
        "import sys; from gitkb.services.indexing import reindex\n"
        "def boom(*a, **k): raise RuntimeError('planted fault')\n"
        "reindex.reindex = boom\n"
        "from gitkb.cli.main import main; main(sys.argv[1:])"
    )
    proc = run(["--home", str(home), "reindex"], cwd=home, code=code)
    line = one_line_error(proc)
    assert "planted fault" in line and "details in" in line
    log = (home / "logs" / "gitkb.log").read_text()
    assert "Traceback" in log and "planted fault" in log


def test_a_command_module_that_fails_to_import(home: Path) -> None:
    code = (
        "import sys; sys.modules['gitkb.cli.commands.docs'] = None\n"
        "from gitkb.cli.main import main; main(sys.argv[1:])"
    )
    proc = run(["--home", str(home), "status"], cwd=home, code=code)
    line = one_line_error(proc)
    assert "ModuleNotFoundError" in line and "gitkb.cli.commands.docs" in line and "details in" in line


def test_ctrl_c_in_a_progress_callback(home: Path, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.md").write_text("# A\n\nwords\n")
    code = (
        "import sys; from gitkb.services.indexing import ingest\n"
        "real = ingest.ingest_entries\n"
        "def interrupted(*a, progress=None, **k):\n"
        "    def p(done, total): raise KeyboardInterrupt\n"
        "    return real(*a, progress=p, **k)\n"
        "ingest.ingest_entries = interrupted\n"
        "from gitkb.cli.main import main; main(sys.argv[1:])"
    )
    assert run(["--home", str(home), "index", "create", "kb"], cwd=home).returncode == 0
    proc = run(["--home", str(home), "add", "kb", str(tmp_path / "d")], cwd=home, code=code)
    assert one_line_error(proc, 130) == "interrupted"


def test_a_terminal_encoding_without_the_characters(home: Path) -> None:
    assert run(["--home", str(home), "index", "create", "kb"], cwd=home).returncode == 0
    added = run(
        [
            "--home",
            str(home),
            "add-text",
            "kb",
            "# 名前 ünïcødé\n\nwords",
            "--filepath",
            "n/名前.md",
            "--no-wait",
        ],
        cwd=home,
    )
    assert added.returncode == 0, added.stderr
    proc = run(
        ["--home", str(home), "docs", "list", "kb"],
        cwd=home,
        env={"PYTHONIOENCODING": "latin-1"},
        encoding="latin-1",
    )
    assert proc.returncode == 0, proc.stderr
    assert "n/\\u540d\\u524d.md" in proc.stdout and "ünïcødé" in proc.stdout  # latin-1 has these
    assert "Traceback" not in proc.stderr
