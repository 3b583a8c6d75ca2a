"""One name per thing: every option of every CLI command the action table names is a parameter
of (one of) that command's actions, by name, dashes for underscores; the rules and exceptions
below are the whole list. Options renamed to match keep their old spelling as a hidden alias."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gitkb.cli.main import cli
from gitkb.cli.names import Renamed
from gitkb.core.action_table import ACTIONS

# Options that are keys of an object parameter (``settings``, ``forge``, ``auth``), not parameters.
OBJECT_KEYS: dict[str, set[str]] = {
    "settings": {"fusion", "semantic_weight", "rrf_k", "bm25_k1", "bm25_b"},  # index tune
    "forge": {
        "forge_repo",
        "forge_api_url",
        "forge_credential",
        "forge_token_env",
        "forge_app_id",
        "forge_app_key_env",
    },
    "auth": {
        "token_env",
        "secrets_file",
        "secrets_key",
        "ssh_key",
    },  # source add (refused: secrets are named)
}
# Options of the terminal only, on any command.
CLI_ONLY: dict[str, str] = {
    "no_wait": "the command waits for vectors (or its job) unless told not to; the library never waits",
    "yes": "deletes a whole thing without asking (gitkb.cli.confirm)",
}
# (command, option) → why it is not a table parameter
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("index tune", "unset"): "names keys of settings to drop (settings={key: None})",
    ("propose", "content_file"): "content, read from a file",
    ("jobs list", "limit"): "the older spelling of --count, hidden from --help",
    ("propose", "delete"): "selects propose_kb_delete (its cli field: gitkb propose --delete)",
    ("propose", "rename_to"): "selects propose_kb_rename and carries new_relative_path (its cli field)",
}
INDEX_WORDS = {"index_name", "indexes", "index"}  # `--index` is the CLI's one word for an index parameter


def commands() -> dict[str, tuple[click.Command, set[str]]]:
    """CLI command path → (the command, the wire parameters of every action it runs)."""
    out: dict[str, tuple[click.Command, set[str]]] = {}
    for a in ACTIONS.values():
        if not a.cli:
            continue
        path = [w for w in a.cli.split()[1:] if not w.startswith("-")]
        cmd: click.Command = cli
        for w in path:
            assert isinstance(cmd, click.Group), a.cli
            cmd = cmd.commands[w]
        key = " ".join(path)
        params = out.setdefault(key, (cmd, set()))[1]
        params.update(p.name for p in a.wire_params)
    return out


def maps(name: str, params: set[str], opt: click.Option) -> bool:
    if name in params:
        return True
    if name.startswith("no_") and opt.is_flag and name[3:] in params:
        return True  # --no-embeddings is embeddings=False
    if opt.multiple and f"{name}s" in params:
        return True  # a repeatable --kb for the list kbs
    if name == "index" and params & INDEX_WORDS:
        return True
    return any(name in keys for obj, keys in OBJECT_KEYS.items() if obj in params)


def test_every_option_is_a_table_parameter_of_its_action() -> None:
    checked, bad = 0, []
    table = commands()
    assert len(table) > 40
    for path, (cmd, params) in table.items():
        for opt in cmd.params:
            if not isinstance(opt, click.Option) or opt.name == "help":
                continue
            old = set(opt.old) if isinstance(opt, Renamed) else set()
            for spelling in [o for o in opt.opts if o not in old and o.startswith("--")]:
                name = spelling.lstrip("-").replace("-", "_")
                checked += 1
                if (path, name) not in EXCEPTIONS and name not in CLI_ONLY and not maps(name, params, opt):
                    bad.append(f"gitkb {path} {spelling} (parameters: {sorted(params)})")
    assert checked > 80
    assert not bad, "\n".join(bad)


def test_exceptions_are_still_needed() -> None:
    """A stale entry would hide a renamed option: every exception names an option that exists."""
    table = commands()
    for path, name in EXCEPTIONS:
        cmd, params = table[path]
        names = {
            o.lstrip("-").replace("-", "_") for p in cmd.params if isinstance(p, click.Option) for o in p.opts
        }
        assert name in names and name not in params, (path, name)


@pytest.mark.parametrize(
    ("path", "new", "old"),
    [
        ("docs get", "--pagination-mode", "--mode"),
        ("docs list", "--show-files-only", "--files-only"),
        ("agent assign", "--default-top-n", "--top-k"),
        ("agent assign", "--default-top-n", "--default-top-k"),
    ],
)
def test_renamed_options_keep_their_old_spelling_hidden(path: str, new: str, old: str) -> None:
    cmd, _ = commands()[path]
    opt = next(p for p in cmd.params if isinstance(p, click.Option) and new in p.opts)
    assert isinstance(opt, Renamed) and old in opt.opts
    shown = CliRunner().invoke(cli, [*path.split(), "--help"]).output
    assert new in shown and old not in shown.replace(new, "")


def test_old_and_new_spellings_do_the_same(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    home.mkdir()
    (home / "gitkb.toml").write_text('[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n')
    runner = CliRunner()

    def gitkb(*args: str) -> dict:  # type: ignore[type-arg]
        res = runner.invoke(cli, ["--home", str(home), "--json", *args], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return dict(json.loads(res.stdout))

    gitkb("index", "create", "kb")
    gitkb("add-text", "kb", "line one\nline two\nline three\n", "--filepath", "a.txt")
    by_new = gitkb("docs", "get", "kb", "a.txt", "--pagination-mode", "chars", "--count", "4")
    by_old = gitkb("docs", "get", "kb", "a.txt", "--mode", "chars", "--count", "4")
    assert by_new["Content"] == by_old["Content"] == "line"
    new_list = gitkb("docs", "list", "kb", "--show-files-only")
    assert new_list["Documents"] == gitkb("docs", "list", "kb", "--files-only")["Documents"]
    gitkb("kb", "create", "ops", "--index", "kb")
    assert gitkb("agent", "assign", "bot", "ops", "--default-top-n", "7")["default_top_n"] == 7
    assert gitkb("agent", "assign", "bot", "ops", "--default-top-k", "8")["default_top_n"] == 8
    assert gitkb("agent", "assign", "bot", "ops", "--top-k", "9")["default_top_n"] == 9
