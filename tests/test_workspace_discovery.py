"""The workspace a command means: ``--home``, else ``GITKB_HOME``, else the nearest ``.gitkb``
upward from the current directory. Discovery never creates one; a read with no workspace
exits 1 saying where it looked; ``gitkb init [DIR]`` creates one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gitkb.cli.main import cli

GITKB = [sys.executable, "-c", "import sys; from gitkb.cli.main import main; main(sys.argv[1:])"]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder to work in; discovery does not look above it."""
    top = tmp_path / "top"
    top.mkdir()
    monkeypatch.setenv("GITKB_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.setenv("GITKB_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("GITKB_EMBEDDING_MODEL", "hashing-384")
    return top


def gitkb(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    finally:
        os.chdir(old)


def created(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_the_issue_a_search_from_another_folder_creates_nothing(root: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITKB_HOME")}
    p = subprocess.run(
        [*GITKB, "search", "hello"], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "No results" not in p.stdout
    assert "no gitkb workspace found" in p.stderr and str(root) in p.stderr and "gitkb init" in p.stderr
    assert "Traceback" not in p.stderr
    assert created(root) == []


def test_reads_and_writes_with_no_workspace_exit_1(root: Path) -> None:
    sub = root / "a" / "b"
    sub.mkdir(parents=True)
    for args in (["index", "list"], ["status"], ["docs", "list", "kb"], ["jobs", "list"]):
        r = gitkb(sub, *args)
        assert r.exit_code == 1, (args, r.output)
        assert (
            f"looked for .gitkb/ in {sub}, {sub.parent}, {root}" in r.output
            and "nothing was created" in r.output
        )
    r = gitkb(sub, "index", "create", "kb")  # a write: discovery never creates one either
    assert r.exit_code == 1 and "a command that writes needs one" in r.output and "gitkb init" in r.output
    assert created(root) == ["a", "a/b"]


def test_discovery_finds_the_nearest_gitkb_upward(root: Path) -> None:
    assert gitkb(root, "init").exit_code == 0
    assert (root / ".gitkb" / "catalog.sqlite3").is_file()
    assert gitkb(root, "index", "create", "outer").exit_code == 0
    deep = root / "proj" / "docs" / "deep"
    deep.mkdir(parents=True)
    r = gitkb(deep, "--json", "index", "list")
    assert r.exit_code == 0 and json.loads(r.output)["Indices"] == ["outer"], r.output
    # a nearer one wins, as git's nearest .git does
    assert gitkb(root / "proj", "init").exit_code == 0
    assert gitkb(deep, "index", "create", "inner").exit_code == 0
    assert json.loads(gitkb(deep, "--json", "index", "list").output)["Indices"] == ["inner"]
    assert json.loads(gitkb(root, "--json", "index", "list").output)["Indices"] == ["outer"]


def test_explicit_home_beats_discovery_and_reads_never_create_it(root: Path) -> None:
    assert gitkb(root, "init").exit_code == 0
    missing = root / "elsewhere"
    r = gitkb(root, "--home", str(missing), "index", "list")
    assert r.exit_code == 1 and f"no gitkb workspace at {missing} (from --home)" in r.output
    r = gitkb(root, "index", "list", env={"GITKB_HOME": str(missing)})
    assert r.exit_code == 1 and "(from GITKB_HOME)" in r.output
    assert not missing.exists()
    # a write creates the workspace it was explicitly given, as before
    assert gitkb(root, "--home", str(missing), "index", "create", "kb").exit_code == 0
    assert (missing / "catalog.sqlite3").is_file()
    listed = gitkb(root / ".gitkb", "--json", "--home", str(missing), "index", "list")
    assert json.loads(listed.output)["Indices"] == ["kb"]
    by_env = root / "by-env"
    assert gitkb(root, "index", "create", "e", env={"GITKB_HOME": str(by_env)}).exit_code == 0
    assert json.loads(gitkb(root, "--json", "index", "list", env={"GITKB_HOME": str(by_env)}).output)[
        "Indices"
    ] == ["e"]
    # --home wins over GITKB_HOME; both win over the ./.gitkb found here
    r = gitkb(root, "--json", "--home", str(missing), "index", "list", env={"GITKB_HOME": str(by_env)})
    assert json.loads(r.output)["Indices"] == ["kb"]
    assert json.loads(gitkb(root, "--json", "index", "list").output)["Indices"] == []


def test_init_creates_a_workspace_idempotently_and_never_in_a_busy_folder(root: Path) -> None:
    r = gitkb(root, "--json", "init")
    body = json.loads(r.output)
    assert r.exit_code == 0 and body["created"] is True and body["home"] == str(root / ".gitkb")
    again = json.loads(gitkb(root, "--json", "init").output)
    assert again["Success"] is True and again["created"] is False  # idempotent
    named = gitkb(root, "init", "kbs/main")
    assert named.exit_code == 0 and (root / "kbs" / "main" / "catalog.sqlite3").is_file()
    assert "--home" in named.output  # discovery looks for .gitkb: say how to use this one
    busy = root / "notes"
    busy.mkdir()
    (busy / "todo.txt").write_text("x")
    r = gitkb(root, "init", str(busy))
    assert r.exit_code == 1 and "not empty" in r.output
    assert sorted(p.name for p in busy.iterdir()) == ["todo.txt"]
    assert gitkb(root, "--home", str(root / "via-home"), "init").exit_code == 0
    assert (root / "via-home" / "catalog.sqlite3").is_file()


def test_an_unexpected_error_logs_without_making_a_gitkb_here(root: Path, tmp_path: Path) -> None:
    """A --home under a regular file fails unexpectedly (exit 3); its log must not land in a
    new ./.gitkb, which the next command would discover as a workspace."""
    (root / "file").write_text("x")
    logs = tmp_path / "tmp"
    logs.mkdir()
    env = {**os.environ, "TMPDIR": str(logs)}
    p = subprocess.run(
        [*GITKB, "--home", str(root / "file" / "ws"), "index", "create", "kb"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert not (root / ".gitkb").exists()
    where = p.stderr.rsplit("details in ", 1)[1].rstrip(")\n")
    assert Path(where).is_file() and Path(where).is_relative_to(logs), p.stderr
