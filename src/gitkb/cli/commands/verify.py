"""gitkb verify [--index NAME] [--repair]"""

from __future__ import annotations

import sys
from typing import Any

import click

from gitkb.cli.runner import CliState, run


def _render(d: dict[str, Any]) -> None:
    click.echo(d.get("Message", ""))
    for diff in d.get("differences") or []:
        sample = ", ".join(diff.get("sample") or [])
        more = " ..." if diff["count"] > len(diff.get("sample") or []) else ""
        click.echo(f"  {diff['kind']:<26} {diff['count']:>7}  {diff['store']}: {diff['detail']}")
        if sample:
            click.echo(f"  {'':<26} {'':>7}  e.g. {sample}{more}")
    for line in d.get("repaired") or []:
        click.echo(f"  repaired: {line}")
    for diff in d.get("remaining") or []:
        click.echo(f"  remaining: {diff['kind']} ({diff['count']}) in {diff['store']}")


@click.command("verify")
@click.option("--index", "index_name", help="Only this index (the workspace-wide checks are skipped).")
@click.option("--repair", is_flag=True, help="Fix what the derived stores can fix, and say what was done.")
def verify(index_name: str | None, repair: bool) -> None:
    """Do the keyword index, vectors, clones and watermarks agree with the catalog? Exit 1 when not."""
    seen: dict[str, Any] = {}

    def call(ws: Any) -> dict[str, Any]:
        data: dict[str, Any] = ws.verify(index_name=index_name, repair=repair)
        seen.update(data)
        return data

    run(call, _render)
    if seen.get("Success") and not seen.get("clean"):
        state = click.get_current_context().find_object(CliState)
        if state is not None:
            state.close()
        sys.exit(1)


def register(group: click.Group) -> None:
    group.add_command(verify)
