"""gitkb search QUERY"""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.runner import run


def render_results(data: dict[str, Any]) -> None:
    results = data.get("Results", [])
    if not results:
        click.echo("No results.")
        return
    for i, r in enumerate(results, 1):
        loc = r.get("location", {})
        click.echo(
            f"[{i}] {r.get('document_title') or r['filepath']}  ({r['index_name']}:{r['filepath']}"
            f" lines {loc.get('line_start')}-{loc.get('line_end')})  score {r['score']:.3f}"
            f"  [{'+'.join(r.get('retrievers') or [])}]"
        )
        click.echo(f"    {r.get('snippet', '')}")
        click.echo(f"    id {r['id']}" + (f"  {r['source_uri']}" if r.get("source_uri") else ""))


@click.command("search")
@click.argument("query")
@click.option("--index", "indexes", multiple=True, help="Search this index (repeatable); default all.")
@click.option("--top-n", type=int, default=10, show_default=True)
@click.option("--mode", type=click.Choice(["keyword", "semantic", "hybrid"]))
@click.option("--tenant")
def search(query: str, indexes: tuple[str, ...], top_n: int, mode: str | None, tenant: str | None) -> None:
    """Search indexes; every hit is a citation (path, lines, chunk id)."""
    run(
        lambda ws: ws.document_index(
            "SEARCH", query=query, indexes=list(indexes) or None, top_n=top_n, mode=mode, tenant=tenant
        ),
        render_results,
    )


def register(group: click.Group) -> None:
    group.add_command(search)
