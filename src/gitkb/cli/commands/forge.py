"""gitkb forge merge|close (the embedded local forge's buttons)"""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.runner import run


@click.group("forge")
def forge_group() -> None:
    """The embedded local forge: merge or close a change request on a remote on this machine."""


def _render_merge(data: dict[str, Any]) -> None:
    click.echo(data.get("Message", ""))
    sync = data.get("sync")
    if sync:
        click.echo(f"  {sync.get('Message', '')}")


@forge_group.command("merge")
@click.argument("source")
@click.argument("number", type=int)
@click.option("--no-wait", is_flag=True, help="Queue the sync job and return.")
def merge(source: str, number: int, no_wait: bool) -> None:
    """Merge change request NUMBER of SOURCE into its base branch, then sync the index to the merge."""
    run(lambda ws: ws.forge_merge(source, number, wait=not no_wait), _render_merge)


@forge_group.command("close")
@click.argument("source")
@click.argument("number", type=int)
def close(source: str, number: int) -> None:
    """Close change request NUMBER of SOURCE without merging (its proposals stay staged)."""
    run(lambda ws: ws.forge_close(source, number))


def register(group: click.Group) -> None:
    group.add_command(forge_group)
