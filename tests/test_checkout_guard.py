"""`gitkb checkout` (read-only working copies at the synced commit) and `gitkb guard` (the agent hook).

Real git repositories: the example handbook pushed to a bare remote, a source synced from it, a
checkout made from the managed clone. The guard is fed the hook JSON of each tool kind.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gitkb.cli.main import cli
from helpers import SOURCE, Upstream, git

ROTATE = "docs/runbooks/rotate-api-keys.md"


@pytest.fixture
def co(source_ws: Any, tmp_path: Path) -> Path:
    out = source_ws.checkout(SOURCE, str(tmp_path / "kb-checkout"))
    assert out["Success"], out
    return Path(out["directory"])


def write_bits(root: Path) -> list[str]:
    """Files and folders of the working tree (not .git) that still have a write bit."""
    found = []
    for dirpath, dirs, files in os.walk(root):
        if Path(dirpath) == root:
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*dirs, *files, ""] if Path(dirpath) == root else [*dirs, *files]:
            p = Path(dirpath) / name
            if not p.is_symlink() and stat.S_IMODE(os.lstat(p).st_mode) & 0o222:
                found.append(str(p.relative_to(root)))
    return found


# -- checkout -------------------------------------------------------------------------------


def test_checkout_is_the_synced_commit_read_only_and_recorded(source_ws: Any, co: Path) -> None:
    from gitkb.stores.catalog import checkouts, sources

    synced = sources.get_by_name(source_ws.ctx.catalog.conn, SOURCE).synced_commit
    assert synced and git(co, "rev-parse", "HEAD") == synced
    assert "# Rotate API keys" in (co / ROTATE).read_text()
    assert (co / "README.md").exists()  # the whole repository, not only the documents root
    assert write_bits(co) == []
    assert git(co, "status", "--porcelain") == ""
    again = source_ws.checkout(SOURCE, str(co))  # the same folder again: a refresh, one row
    assert again["Success"] and again["checkout_id"]
    rows = checkouts.for_node(source_ws.ctx.catalog.conn, again["node"])
    assert [(r.path, r.commit_id) for r in rows] == [(str(co), synced)]


def test_checkout_hooks_refuse_commits_and_pushes_naming_propose_kb_edit(
    co: Path, upstream: Upstream
) -> None:
    before = git(co, "rev-parse", "HEAD")
    for args in (
        ("commit", "-q", "--allow-empty", "-m", "hand edit"),
        ("commit", "-q", "--no-verify", "--allow-empty", "-m", "hand edit"),  # reference-transaction stops it
        ("push", str(upstream.remote), "HEAD:refs/heads/hand-edit"),
        ("branch", "hand-edit"),
    ):
        out = git(co, *args, check=False)
        assert "propose_kb_edit" in out, (args, out)
    assert git(co, "rev-parse", "HEAD") == before
    assert upstream.remote_sha("hand-edit") is None


def test_bad_checkout_folders_write_nothing(source_ws: Any, tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("keep")
    out = source_ws.checkout(SOURCE, str(busy))
    assert out["code"] == "invalid_argument" and "nothing was written" in out["Error"]
    assert sorted(os.listdir(busy)) == ["mine.txt"]
    assert source_ws.checkout(SOURCE, "relative/dir")["code"] == "invalid_argument"
    assert source_ws.checkout(SOURCE, str(source_ws.home / "co"))["code"] == "invalid_argument"
    assert source_ws.checkout("nope", str(tmp_path / "x"))["code"] == "not_found"
    assert not (tmp_path / "x").exists()


def test_no_checkout_inside_a_checkout_and_a_broken_one_is_taken_again(source_ws: Any, co: Path) -> None:
    out = source_ws.checkout(SOURCE, str(co / "docs" / "nested"))
    assert out["code"] == "invalid_argument" and str(co) in out["Error"]
    assert not (co / "docs" / "nested").exists()
    from gitkb.stores import checkout_tree

    checkout_tree.make_writable_for_refresh(co)  # a refresh that died half way: files gone, the mark kept
    (co / ROTATE).unlink()
    again = source_ws.checkout(SOURCE, str(co))
    assert again["Success"], again
    assert (co / ROTATE).exists() and write_bits(co) == []


def test_checkout_is_admin_only(source_ws: Any, tmp_path: Path) -> None:
    from gitkb.core.action_table import ACTIONS

    assert ACTIONS["checkout"].cls == "admin"
    from gitkb.services.access import principals

    for who in (
        source_ws.as_agent("writer-bot"),
        source_ws.as_principal(principals.token("ci", ("propose", "operate"))),
    ):
        out = who.checkout(SOURCE, str(tmp_path / "agent-co"))
        assert out["code"] == "forbidden", out
    assert not (tmp_path / "agent-co").exists()


def test_cli_checkout_then_the_guard_refuses_a_write_to_it(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "ws"
    home.mkdir()
    (home / "gitkb.toml").write_text('[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n')

    def gitkb(*args: str, stdin: str | None = None) -> Any:
        return CliRunner().invoke(cli, ["--home", str(home), *args], input=stdin, catch_exceptions=False)

    assert gitkb("source", "add", SOURCE, str(upstream.remote)).exit_code == 0
    assert gitkb("checkout", SOURCE, "kb-ro").exit_code == 1  # never synced: nothing to show yet
    assert gitkb("source", "sync", SOURCE).exit_code == 0
    monkeypatch.chdir(tmp_path)
    made = gitkb("checkout", SOURCE, "kb-ro")  # relative to the CLI's cwd
    assert made.exit_code == 0 and "read-only" in made.output, made.output
    assert (tmp_path / "kb-ro" / ROTATE).exists()
    hook = gitkb("guard", stdin=json.dumps({"tool": "edit", "path": f"kb-ro/{ROTATE}"}))
    assert hook.exit_code == 2 and json.loads(hook.stdout)["path"] == ROTATE


def test_every_sync_refreshes_the_checkout(source_ws: Any, co: Path, upstream: Upstream) -> None:
    upstream.write("docs/runbooks/rotate-api-keys.md", "# Rotate\n\nRotate every 30 days.\n")
    (upstream.work / "docs/policies").joinpath("gone.md").write_text("# tmp\n")
    upstream.commit_push("edit")
    (upstream.work / "docs/policies/gone.md").unlink()
    new = upstream.commit_push("remove")
    out = source_ws.source_sync(SOURCE)
    assert out["Success"] and out["checkouts_refreshed"] == 1, out
    assert git(co, "rev-parse", "HEAD") == new
    assert "30 days" in (co / ROTATE).read_text()
    assert not (co / "docs/policies/gone.md").exists()
    assert write_bits(co) == [] and git(co, "status", "--porcelain") == ""


def test_each_node_refreshes_its_own_checkouts_when_the_synced_commit_moves(
    source_ws: Any, upstream: Upstream, tmp_path: Path
) -> None:
    from gitkb import Workspace

    node_b = Workspace(
        source_ws.home, node="node-b", embedding_provider="hashing", embedding_model="hashing-384"
    )
    try:
        assert not node_b.ctx.is_writer  # the lease is node a's: node b only reads and forwards writes
        co_b = Path(node_b.checkout(SOURCE, str(tmp_path / "co-b"))["directory"])
        old = git(co_b, "rev-parse", "HEAD")
        upstream.write("docs/runbooks/rotate-api-keys.md", "# Rotate\n\nRotate weekly.\n")
        new = upstream.commit_push("weekly")
        synced = source_ws.source_sync(SOURCE)  # runs on node a: node a has no checkout to refresh
        assert synced["Success"] and "checkouts_refreshed" not in synced
        assert git(co_b, "rev-parse", "HEAD") == old  # node a never touches node b's disk
        assert node_b.source_list()["Success"]  # node b's next call sees the synced commit moved
        assert git(co_b, "rev-parse", "HEAD") == new
        assert "weekly" in (co_b / ROTATE).read_text() and write_bits(co_b) == []
    finally:
        node_b.close()


# -- guard ----------------------------------------------------------------------------------


def guard(payload: Any) -> tuple[int, str, str]:
    res = CliRunner().invoke(
        cli, ["guard"], input=payload if isinstance(payload, str) else json.dumps(payload)
    )
    return res.exit_code, res.stdout, res.stderr


def claude(tool: str, cwd: Path, **tool_input: Any) -> dict[str, Any]:
    return {
        "session_id": "s1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_1",
    }


def bash(command: str, cwd: Path) -> dict[str, Any]:
    return claude("Bash", cwd, command=command, description="run")


DENIED_SHELL = [
    "sed -i 's/90 days/60 days/' docs/runbooks/rotate-api-keys.md",
    "sed -i.bak -e 's/a/b/' README.md",
    "echo hacked > README.md",
    "echo more >> docs/runbooks/rotate-api-keys.md",
    "cat README.md | tee docs/copy.md",
    "rm docs/runbooks/rotate-api-keys.md",
    "rm -rf docs",
    "mv README.md README.old",
    "cp /etc/hostname docs/new.md",
    "touch docs/new.md",
    "mkdir docs/new",
    "chmod u+w README.md",
    "git commit -am 'hand edit'",
    "git push origin HEAD:main",
    "git add -A",
    "git checkout -- README.md",
    "git reset --hard HEAD~1",
    "git stash",
    "git -c core.hooksPath=/dev/null commit --no-verify -m x",
    "git branch feature",
    "ls && rm README.md",
    'python3 -c \'open("README.md","w").write("x")\'',
    "bash -c 'echo x > README.md'",
    "find . -name '*.md' -delete",
    "find . -name '*.md' -exec sed -i s/a/b/ {} +",
    "ls | xargs rm",
    "echo $(rm README.md)",
    "perl -pi -e 's/a/b/' README.md",
    "truncate -s 0 README.md",
    "dd if=/dev/zero of=README.md count=1",
    "cat <<EOF > docs/new.md\nhello\nEOF",
    "echo 'unterminated",
    "make docs",
    'echo x >"README.md"',
    "{ rm README.md; }",
    "rm \\\n README.md",
    "ls; # a comment\nrm README.md",
]
ALLOWED_SHELL = [
    "cat README.md",
    "grep -rn 'rotate' docs",
    "rg -n days docs/runbooks",
    "ls -la docs",
    "head -n 5 docs/runbooks/rotate-api-keys.md",
    "tail -3 README.md",
    "wc -l docs/runbooks/*.md",
    "find docs -name '*.md'",
    "sed -n '1,5p' README.md",
    "git log --oneline -5",
    "git show HEAD:README.md",
    "git diff HEAD~0",
    "git status",
    "git blame README.md",
    "git ls-files docs",
    "git branch",
    "cat README.md 2>/dev/null | grep gitkb > /dev/null",
    "echo ok 2>&1",
    "grep '|' docs/runbooks/rotate-api-keys.md",  # a quoted operator is a word: Markdown tables
    'grep -n ">" README.md',  # and blockquotes
    "grep -c 'a;b' README.md # rm README.md",
]


@pytest.mark.parametrize("command", DENIED_SHELL)
def test_guard_denies_shell_writes_inside_a_checkout(co: Path, command: str) -> None:
    code, out, err = guard(bash(command, co))
    assert code == 0 and err == "", (command, out, err)
    hook = json.loads(out)["hookSpecificOutput"]
    assert hook["hookEventName"] == "PreToolUse" and hook["permissionDecision"] == "deny", command
    reason = hook["permissionDecisionReason"]
    for word in (
        "managed_repo_guard",
        "managed_document_repo",
        "propose_kb_edit",
        "open_kb_pull_request",
        SOURCE,
    ):
        assert word in reason, (command, reason)


@pytest.mark.parametrize("command", ALLOWED_SHELL)
def test_guard_allows_shell_reads_inside_a_checkout(co: Path, command: str) -> None:
    assert guard(bash(command, co)) == (0, "", ""), command


def details(out: str) -> dict[str, Any]:
    reason = json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"]
    return json.loads(reason[reason.index("{") :])


def test_guard_denies_file_tool_writes_with_the_repository_path(co: Path, tmp_path: Path) -> None:
    target = co / ROTATE
    for payload in (
        claude("Write", tmp_path, file_path=str(target), content="x"),
        claude("Edit", tmp_path, file_path=str(target), old_string="90", new_string="60"),
        claude("MultiEdit", tmp_path, file_path=str(target), edits=[{"old_string": "a", "new_string": "b"}]),
        claude("NotebookEdit", tmp_path, notebook_path=str(co / "docs/nb.ipynb"), new_source="x"),
        claude("Write", co / "docs", file_path="runbooks/rotate-api-keys.md", content="x"),  # relative to cwd
        claude("Write", tmp_path, file_path=str(co / "docs" / ".." / ROTATE), content="x"),  # ..
    ):
        code, out, _ = guard(payload)
        d = details(out)
        assert code == 0 and d["code"] == "managed_repo_guard" and d["managed_document_repo"] is True
        assert d["source"] == SOURCE and d["path"] in (ROTATE, "docs/nb.ipynb"), d
        assert any("propose_kb_edit" in s for s in d["next_steps"])
        assert any("open_kb_pull_request" in s for s in d["next_steps"])


def test_guard_follows_symlinks_into_a_checkout(co: Path, tmp_path: Path) -> None:
    link = tmp_path / "innocent"
    link.symlink_to(co / "docs")
    code, out, _ = guard(
        claude(
            "Edit",
            tmp_path,
            file_path=str(link / "runbooks/rotate-api-keys.md"),
            old_string="a",
            new_string="b",
        )
    )
    assert details(out)["path"] == ROTATE
    assert details(guard(bash("rm innocent/runbooks/rotate-api-keys.md", tmp_path))[1])["path"] == ROTATE
    assert details(guard(bash(f"cd {co}/docs && git commit -m x", tmp_path))[1])["path"] == "docs"
    assert details(guard(bash("cd innocent/.. && cd innocent && echo x >> index.md", tmp_path))[1])[
        "path"
    ] == ("docs/index.md")


def test_guard_allows_reads_and_everything_outside_checkouts(co: Path, tmp_path: Path) -> None:
    other = tmp_path / "project"
    other.mkdir()
    for payload in (
        claude("Read", tmp_path, file_path=str(co / ROTATE)),
        claude("Grep", tmp_path, pattern="rotate", path=str(co)),
        claude("Glob", tmp_path, pattern="**/*.md", path=str(co)),
        claude("LS", tmp_path, path=str(co / "docs")),
        claude(
            "mcp__gitkb__propose_kb_edit", co, source_id_or_index=SOURCE, relative_path=ROTATE, content="x"
        ),
        claude("WebFetch", co, url="https://example.com", prompt="x"),
        claude("Write", other, file_path=str(other / "notes.md"), content="x"),
        claude("Edit", other, file_path="notes.md", old_string="a", new_string="b"),
        bash("rm -rf build && git commit -am wip && git push", other),
        bash(f"cp {co}/{ROTATE} ./copy.md && sed -i s/a/b/ copy.md", other),
        bash(f"git -C {other} commit -m x", co),  # a git mutation aimed elsewhere
        {"tool": "read", "path": str(co / ROTATE)},
        {"tool": "write", "path": str(other / "x.md")},
        {"tool": "shell", "command": "grep -rn days .", "cwd": str(co)},
    ):
        assert guard(payload) == (0, "", ""), payload


def test_guard_plain_form_denies_with_exit_2_and_json(co: Path, tmp_path: Path) -> None:
    cases = [
        {"tool": "write", "path": str(co / ROTATE)},
        {"tool": "edit", "path": "docs/runbooks/rotate-api-keys.md", "cwd": str(co)},
        {"tool": "delete", "path": str(co / "README.md")},
        {"tool": "move", "path": str(co / "README.md"), "new_path": str(tmp_path / "r.md")},
        {"tool": "shell", "command": "git push", "cwd": str(co)},
        {"command": "echo x > README.md", "cwd": str(co)},
        {"tool": "frobnicate", "path": str(co / "README.md")},  # unknown tool inside a checkout
    ]
    for payload in cases:
        code, out, err = guard(payload)
        assert code == 2, payload
        d = json.loads(out)
        assert d["decision"] == "deny" and d["code"] == "managed_repo_guard" and d["managed_document_repo"]
        assert d["source"] == SOURCE and "propose_kb_edit" in err
    assert json.loads(guard(cases[0])[1])["path"] == ROTATE


def test_guard_refuses_what_it_cannot_read() -> None:
    for bad in ("not json", "[]", json.dumps({"tool_name": "Bash"}), json.dumps({"x": 1})):
        code, out, _ = guard(bad)
        assert code == 2 and json.loads(out)["decision"] == "deny", bad


def test_guard_as_a_real_process_needs_no_workspace(co: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITKB_")}
    cmd = [sys.executable, "-c", "import sys; from gitkb.cli.main import main; main(sys.argv[1:])", "guard"]
    proc = subprocess.run(
        cmd,
        input=json.dumps(bash("rm README.md", co)),
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert (
        proc.returncode == 0 and json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    )
    proc = subprocess.run(
        cmd,
        input=json.dumps(bash("cat README.md", co)),
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout) == (0, "")
    assert not (tmp_path / ".gitkb").exists()


def test_guard_reads_other_runtimes_tools_in_the_same_shape(co: Path, tmp_path: Path) -> None:
    def call(tool: str, **tool_input: Any) -> dict[str, Any]:
        return {
            "hook_event_name": "BeforeTool",
            "cwd": str(tmp_path),
            "tool_name": tool,
            "tool_input": tool_input,
        }

    for payload in (
        call("run_shell_command", command="rm README.md", directory=str(co)),
        call("run_shell_command", command=f"sed -i s/a/b/ {co}/README.md"),
        call("write_file", file_path=str(co / "docs/new.md"), content="x"),
        call("replace", file_path=str(co / ROTATE), old_string="a", new_string="b"),
        call("frobnicate", target=str(co / "README.md")),
    ):
        code, out, _ = guard(payload)
        assert code == 0 and details(out)["code"] == "managed_repo_guard", payload
    for payload in (
        call("read_file", file_path=str(co / ROTATE)),
        call("run_shell_command", command="grep -rn days .", directory=str(co)),
        call("run_shell_command", command="rm -f notes.md"),
        call("write_file", file_path=str(tmp_path / "notes.md"), content="x"),
    ):
        assert guard(payload) == (0, "", ""), payload


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab -'\"\\\t.*/", max_size=30))
def test_shell_words_split_as_shlex_splits_them_without_operators(line: str) -> None:
    """Where there is no operator, comment or expansion, the guard's splitter and shlex agree (on
    ``\\\\#`` shlex sees a comment where a shell sees the word ``\\#``: the alphabet leaves ``#`` out)."""
    from gitkb.core.shell_words import split_shell

    try:
        expected = shlex.split(line, comments=True)
    except ValueError:
        with pytest.raises(ValueError):
            split_shell(line)
        return
    assert [str(w) for w in split_shell(line)] == expected
