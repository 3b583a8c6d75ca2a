"""gitkb ask QUESTION — an answer quoted from the indexes, with footnotes."""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.runner import run


def render_answer(data: dict[str, Any]) -> None:
    click.echo(data.get("Answer", ""))
    sources = data.get("Sources") or []
    if not sources:
        return
    click.echo("")
    for i, s in enumerate(sources, 1):
        loc = s.get("location", {})
        quoted = [f for f in data.get("Footnotes", []) if f["marker"] == i]
        lines = ", ".join(f"{f['location']['line_start']}-{f['location']['line_end']}" for f in quoted) or (
            f"{loc.get('line_start')}-{loc.get('line_end')}"
        )
        title = s.get("document_title") or s["filepath"]
        click.echo(f"[{i}] {title}  ({s['index_name']}:{s['filepath']} lines {lines})")
        if s.get("source_uri"):
            click.echo(f"    {s['source_uri']}")


@click.command("ask")
@click.argument("question")
@click.option("--index", "indexes", multiple=True, help="Ask this index (repeatable); default all.")
@click.option("--top-n", type=int, help="Passages to read (default 10).")
@click.option(
    "--mode", type=click.Choice(["keyword", "semantic", "hybrid"]), help="Search mode for the passages."
)
@click.option(
    "--answer-mode",
    type=click.Choice(["extractive", "generative"]),
    help="Default: [ask] mode in gitkb.toml.",
)
@click.option("--tenant")
def ask(
    question: str,
    indexes: tuple[str, ...],
    top_n: int | None,
    mode: str | None,
    answer_mode: str | None,
    tenant: str | None,
) -> None:
    """Answer QUESTION from the indexes; every sentence cites its source ([n])."""
    run(
        lambda ws: ws.document_index(
            "ASK",
            query=question,
            indexes=list(indexes) or None,
            top_n=top_n,
            mode=mode,
            answer_mode=answer_mode,
            tenant=tenant,
        ),
        render_answer,
    )


def register(group: click.Group) -> None:
    group.add_command(ask)
