"""gitkb init [DIR]: create a workspace (default ./.gitkb; else --home/GITKB_HOME when given)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gitkb.cli.home import is_workspace
from gitkb.cli.runner import CliState, report, run
from gitkb.core.config import DEFAULT_HOME
from gitkb.core.errors import InvalidArgument


def _render(d: dict[str, Any]) -> None:
    click.echo(d["Message"])
    for hint in d.get("hints") or []:
        click.echo(f"  hint: {hint}", err=True)


@click.command("init")
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.pass_obj
def init(state: CliState, directory: str | None) -> None:
    """Create a gitkb workspace in DIRECTORY (default ./.gitkb); an existing one is left as is."""
    target = Path(directory or state.home or DEFAULT_HOME).expanduser().absolute()
    existed = is_workspace(target)

    def call(ws: Any) -> dict[str, Any]:
        hints = []
        if target.name != DEFAULT_HOME:
            hints.append(
                f"commands find a workspace by the name {DEFAULT_HOME}; use this one with"
                f" --home {target} or GITKB_HOME={target}"
            )
        verb = "is already a gitkb workspace" if existed else "is a new gitkb workspace"
        return {
            "Success": True,
            "home": str(ws.home),
            "created": not existed,
            "hints": hints,
            "Message": f"{ws.home} {verb}",
        }

    if not existed and target.is_dir() and any(target.iterdir()):
        refused = InvalidArgument(
            f"{target} exists, is not empty and is not a gitkb workspace; nothing was created",
            next_steps=[f"give a directory of its own, e.g. `gitkb init {target / DEFAULT_HOME}`"],
        )
        report(refused.to_response())
        return
    state.home, state.home_source = str(target), "gitkb init"
    run(call, _render)


def register(group: click.Group) -> None:
    group.add_command(init)
