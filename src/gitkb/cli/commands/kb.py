"""gitkb kb create|list|delete"""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.confirm import confirmed, yes_option
from gitkb.cli.output import table
from gitkb.cli.runner import run


@click.group("kb")
def kb_group() -> None:
    """Knowledge bases: named bundles of indexes that agents are assigned."""


@kb_group.command("create")
@click.argument("name")
@click.option(
    "--index", "indexes", multiple=True, required=True, help="An index name or kidx_ id (repeatable)."
)
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


def _what_goes(ws: Any, name: str, force: bool) -> tuple[str, list[str]] | None:
    """What deleting knowledge base NAME removes (None when there is none)."""
    found = [k for k in ws.kb_list().get("KnowledgeBases") or [] if name in (k.get("name"), k.get("kb_id"))]
    if not found:
        return None
    kb = found[0]
    indexes = ", ".join(i["index_name"] for i in kb.get("indexes") or []) or "none"
    goes = [f"the bundle itself; its indexes ({indexes}) keep their documents, chunks and vectors"]
    agents = kb.get("agents") or []
    if agents:
        goes.append(
            f"the assignment of agent(s) {', '.join(agents)}"
            + ("" if force else " (refused without --force)")
        )
    return f"knowledge base {kb['name']!r}", goes


@kb_group.command("delete")
@click.argument("name")
@click.option("--force", is_flag=True, help="Also unassign it from the agents that use it.")
@yes_option
def delete(name: str, force: bool, yes: bool) -> None:
    """Delete knowledge base NAME (its indexes stay; asks first, --yes does not)."""
    act = lambda ws: ws.kb_delete(name, force=force)  # noqa: E731
    run(confirmed(yes, f"knowledge base {name!r}", lambda ws: _what_goes(ws, name, force), act))


def register(group: click.Group) -> None:
    group.add_command(kb_group)
