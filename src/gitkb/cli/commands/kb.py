"""gitkb kb create|list|delete"""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.main import run
from gitkb.cli.output import table


@click.group("kb")
def kb_group() -> None:
    """Knowledge bases: named bundles of indexes that agents are assigned."""


@kb_group.command("create")
@click.argument("name")
@click.option("--index", "indexes", multiple=True, required=True, help="An index name or kidx_ id (repeatable).")
def create(name: str, indexes: tuple[str, ...]) -> None:
    """Create knowledge base NAME over the given indexes (stored by id, so renames keep it)."""
    run(lambda ws: ws.kb_create(name, list(indexes)))


def _render_list(data: dict[str, Any]) -> None:
    kbs = data.get("KnowledgeBases", [])
    if not kbs:
        click.echo("No knowledge bases yet. Create one with: gitkb kb create NAME --index INDEX")
        return
    rows = []
    for k in kbs:
        names = ", ".join(i["index_name"] for i in k["indexes"])
        if k.get("missing_index_ids"):
            names += f" (missing: {len(k['missing_index_ids'])})"
        rows.append((k["name"], names, ", ".join(k.get("agents", []))))
    click.echo(table(rows, ["name", "indexes", "agents"]))


@kb_group.command("list")
def list_() -> None:
    """List knowledge bases, their indexes and the agents using them."""
    run(lambda ws: ws.kb_list(), _render_list)


@kb_group.command("delete")
@click.argument("name")
@click.option("--force", is_flag=True, help="Also unassign it from the agents that use it.")
def delete(name: str, force: bool) -> None:
    """Delete knowledge base NAME (its indexes stay)."""
    run(lambda ws: ws.kb_delete(name, force=force))


def register(group: click.Group) -> None:
    group.add_command(kb_group)
