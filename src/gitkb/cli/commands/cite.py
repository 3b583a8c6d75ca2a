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
    cited = data.get("source_uri") or data.get("path")  # a text document's stale chunk: no source_uri
    click.echo(f"  cited: {cited} lines {data['line_start']}-{data['line_end']}")
    if data.get("head_commit"):  # a git source's citation (a text document has no branch)
        click.echo(f"  head:  {data['head_commit']} ({data.get('branch')})")


@cite_group.command("check")
@click.argument("chunk_id")
def check(chunk_id: str) -> None:
    """Is the cited text still at its commit and lines, and still current at the branch head?"""
    run(lambda ws: ws.cite_check(chunk_id), _render)


def register(group: click.Group) -> None:
    group.add_command(cite_group)
