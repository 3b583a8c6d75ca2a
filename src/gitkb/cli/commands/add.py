"""gitkb add INDEX PATH · gitkb add-text INDEX TEXT|-"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from gitkb.cli.commands.embeddings import vectors_line, wait_for_vectors
from gitkb.cli.progress import Bar
from gitkb.cli.runner import run


def _chunk_options(f: Any) -> Any:
    f = click.option("--chunk-size", type=int)(f)
    f = click.option("--chunk-overlap", type=int)(f)
    f = click.option("--chunk-strategy", type=click.Choice(["sentence", "one_chunk_per_doc", "auto"]))(f)
    f = click.option("--tenant")(f)
    f = click.option("--tier", type=click.Choice(["hot", "warm", "cold"]))(f)
    f = click.option("--ttl-seconds", type=int)(f)
    return f


def _render_add(data: dict[str, Any]) -> None:
    click.echo(data.get("Message", ""))
    for s in data.get("skipped", []):
        if s.get("category") != "excluded":
            click.echo(f"  skipped {s['path']}: {s['category']} ({s['detail']})")
    if vectors_line(data):
        click.echo(vectors_line(data))


@click.command("add")
@click.argument("index")
@click.argument("path", type=click.Path())
@click.option("--base-path", type=click.Path(), help="Store paths relative to this folder.")
@_chunk_options
@click.option(
    "--no-wait", is_flag=True, help="Return once searchable by keyword; vectors follow in the background."
)
def add(index: str, path: str, base_path: str | None, no_wait: bool, **opts: Any) -> None:
    """Add a file or a directory (recursively) to INDEX."""

    def call(ws: Any) -> dict[str, Any]:
        with Bar("indexing") as bar:
            data: dict[str, Any] = ws.document_index(
                "ADD_DOCUMENTS", index_name=index, filepath=path, base_path=base_path, progress=bar, **opts
            )
        return data if no_wait else wait_for_vectors(ws, data)

    run(call, _render_add)


@click.command("add-text")
@click.argument("index")
@click.argument("text")
@click.option("--metadata", help="A JSON object stored with the text.")
@click.option("--filepath", help="Store the text under this path (default texts/<hash>.txt).")
@_chunk_options
@click.option(
    "--no-wait", is_flag=True, help="Return once searchable by keyword; vectors follow in the background."
)
def add_text(
    index: str, text: str, metadata: str | None, filepath: str | None, no_wait: bool, **opts: Any
) -> None:
    """Add raw TEXT (or '-' to read standard input) to INDEX."""
    if text == "-":  # the bytes as sent: a text stream would turn CRLF and a lone CR into LF
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise click.UsageError(f"standard input is not UTF-8 text: {exc}") from None
    meta = None
    if metadata:
        try:
            meta = json.loads(metadata)
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--metadata") from exc

    def call(ws: Any) -> dict[str, Any]:
        data: dict[str, Any] = ws.document_index(
            "ADD_TEXT", index_name=index, text=text, metadata=meta, filepath=filepath, **opts
        )
        return data if no_wait else wait_for_vectors(ws, data)

    run(call, _render_add)


def register(group: click.Group) -> None:
    group.add_command(add)
    group.add_command(add_text)
