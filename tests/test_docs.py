"""Every CLI command is documented in README.md (so the table can't silently rot)."""

from __future__ import annotations

from pathlib import Path

import click

from gitkb.cli.main import cli

README = (Path(__file__).resolve().parents[1] / "README.md").read_text("utf-8")


def _commands(cmd: click.Command, prefix: list[str]) -> list[str]:
    if isinstance(cmd, click.Group):
        return [c for name, sub in sorted(cmd.commands.items()) for c in _commands(sub, [*prefix, name])]
    return [" ".join(prefix)]


def test_every_cli_command_is_in_the_readme() -> None:
    missing = [c for c in _commands(cli, []) if f"gitkb {c}" not in README]
    assert missing == [], f"document these in README.md's CLI table: {missing}"


def test_readme_starts_with_exactly_two_setup_commands() -> None:
    lines = README.splitlines()
    assert lines[0] == "# gitkb"
    block = README.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert [line.split("#")[0].strip() for line in block] == ["bash scripts/quickstart", "bash scripts/test"]
