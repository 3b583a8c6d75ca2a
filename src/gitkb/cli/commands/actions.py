"""gitkb actions: every action of the action table with its class (opens no workspace)."""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.output import emit_json, table


@click.command("actions")
@click.option(
    "--class", "cls", help="Only actions of this class (read, propose, write, operate, review, admin)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON (as the global --json does).")
@click.pass_context
def actions_cmd(ctx: click.Context, cls: str | None, as_json: bool) -> None:
    """Every action gitkb offers: its class, whether it runs as a job, its CLI command."""
    from gitkb.core.action_table import ACTIONS, CLASSES  # CLI start: ~4 ms that only this command needs

    if cls is not None and cls not in CLASSES:
        raise click.BadParameter(f"one of {', '.join(CLASSES)}", param_hint="--class")
    listed = [a for a in ACTIONS.values() if cls is None or a.cls == cls]
    data: dict[str, Any] = {
        "Success": True,
        "Actions": [a.as_dict() for a in listed],
        "count": len(listed),
        "Message": f"{len(listed)} action(s)",
    }
    if as_json or ctx.find_root().params.get("as_json"):
        emit_json(data)
        return
    rows = [
        (a.name, a.cls, "job" if a.promotable else "", "agents" if a.agents else "", a.cli) for a in listed
    ]
    click.echo(table(rows, ["action", "class", "promotable", "offered to", "CLI"]))


def register(group: click.Group) -> None:
    group.add_command(actions_cmd)
