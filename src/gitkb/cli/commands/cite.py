"""gitkb cite check CHUNK_ID"""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.runner import run


@click.group("cite")
def cite_group() -> None:
    """Citations from git sources."""


def _render(data: dict[str, Any]) -> None:
    click.echo(f"{data['status']}: {data['Message']}")
    click.echo(f"  cited: {data['source_uri']} lines {data['line_start']}-{data['line_end']}")
    click.echo(f"  head:  {data['head_commit']} ({data['branch']})")


@cite_group.command("check")
@click.argument("chunk_id")
def check(chunk_id: str) -> None:
    """Is the cited text still at its commit and lines, and still current at the branch head?"""
    run(lambda ws: ws.cite_check(chunk_id), _render)


def register(group: click.Group) -> None:
    group.add_command(cite_group)
