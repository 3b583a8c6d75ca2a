"""gitkb agent assign|unassign|show|usage"""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.names import Renamed
from gitkb.cli.output import table
from gitkb.cli.runner import run


@click.group("agent")
def agent_group() -> None:
    """Agents: which knowledge bases each may use, and what it spent."""


@agent_group.command("assign")
@click.argument("agent_id")
@click.argument("kbs", nargs=-1, required=True)
@click.option(
    "--mode",
    type=click.Choice(["read", "propose", "write"]),
    help="read: search and read; propose (default): also propose edits and open pull requests on the"
    " sources feeding these indexes; write: also add and delete documents in indexes no source feeds.",
)
@click.option("--read-only", is_flag=True, help="The same as --mode read.")
@click.option(
    "--default-top-n",
    "default_top_n",
    cls=Renamed,
    old=("--default-top-k", "--top-k"),
    type=int,
    help="The agent's default number of search results (1-50).",
)
def assign(
    agent_id: str, kbs: tuple[str, ...], mode: str | None, read_only: bool, default_top_n: int | None
) -> None:
    """Bind AGENT_ID to the knowledge bases KBS in a mode."""
    if read_only and mode not in (None, "read"):
        raise click.UsageError("--read-only is --mode read; give one of them")
    chosen = "read" if read_only else mode
    run(
        lambda ws: ws.agent_assign(agent_id, list(kbs), mode=chosen, default_top_n=default_top_n),
        _render_show,
    )


@agent_group.command("unassign")
@click.argument("agent_id")
@click.argument("kbs", nargs=-1, required=True)
def unassign(agent_id: str, kbs: tuple[str, ...]) -> None:
    """Remove the bindings of AGENT_ID to KBS."""
    run(lambda ws: ws.agent_unassign(agent_id, list(kbs)))


def _render_show(data: dict[str, Any]) -> None:
    if data.get("Message"):
        click.echo(data["Message"])
    click.echo(f"agent {data['agent_id']}  default top_n {data['default_top_n']}")
    rows = [
        (i["index_name"], i["index_id"], i.get("mode") or "read", ", ".join(i["via"]))
        for i in data.get("Indexes", [])
    ]
    if rows:
        click.echo(table(rows, ["index", "id", "mode", "via"]))
    else:
        click.echo("No indexes: its knowledge bases are empty.")


@agent_group.command("show")
@click.argument("agent_id")
def show(agent_id: str) -> None:
    """The knowledge bases and indexes AGENT_ID may use."""
    run(lambda ws: ws.agent_show(agent_id), _render_show)


def _render_usage(data: dict[str, Any]) -> None:
    click.echo(f"agent {data['agent_id']}: {data['Message']}")
    rows = [
        (k["kind"], k["events"], k["count"], k["tokens"], round(k["duration_ms"] or 0, 1))
        for k in data.get("ByKind", [])
    ]
    if rows:
        click.echo(table(rows, ["kind", "events", "embeddings", "tokens", "ms"]))


@agent_group.command("usage")
@click.argument("agent_id")
def usage(agent_id: str) -> None:
    """Query embeddings recorded for AGENT_ID: count, tokens, time."""
    run(lambda ws: ws.agent_usage(agent_id), _render_usage)


def register(group: click.Group) -> None:
    group.add_command(agent_group)
