"""gitkb docs list|get|rm|mv"""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.names import Renamed
from gitkb.cli.output import table
from gitkb.cli.paging import page_options, with_more
from gitkb.cli.runner import run


@click.group("docs")
def docs_group() -> None:
    """List, read, delete and rename documents of an index."""


def _render_list(data: dict[str, Any]) -> None:
    docs = data.get("Documents", [])
    if docs:
        click.echo(
            table(
                [(d["path"], d["size"], d.get("chunk_count"), d["title"], d["file_id"]) for d in docs],
                ["path", "size", "chunks", "title", "file_id"],
            )
        )
    click.echo(data.get("Message", ""))


@docs_group.command("list")
@click.argument("index")
@click.option("--path-filter", help="Part of the path (runbooks/) or a glob over the whole path (docs/*.md).")
@click.option("--query", help="Documents whose content holds every word (keyword index).")
@click.option(
    "--show-files-only",
    cls=Renamed,
    old=("--files-only",),
    is_flag=True,
    help="File-level entries only, without their chunks.",
)
@page_options
def list_(
    index: str,
    path_filter: str | None,
    query: str | None,
    show_files_only: bool,
    start: int | None,
    count: int | None,
) -> None:
    """List documents of INDEX, a page at a time (at most 50)."""
    run(
        lambda ws: ws.document_index(
            "LIST_DOCUMENTS",
            index_name=index,
            path_filter=path_filter,
            query=query,
            show_files_only=show_files_only,
            start=start,
            count=count,
        ),
        with_more(_render_list),
    )


def _render_get(data: dict[str, Any]) -> None:
    if "Content" in data:
        click.echo(data["Content"], nl=False)
        if data["Content"] and not data["Content"].endswith("\n"):
            click.echo()
    else:
        for c in data.get("Chunks", []):
            loc = c["location"]
            click.echo(f"--- chunk {c['ordinal']} {c['id']} lines {loc['line_start']}-{loc['line_end']}")
            click.echo(c["text"])
    if data.get("has_more"):
        click.echo(f"(more: --start {data['next_start']})", err=True)


@docs_group.command("get")
@click.argument("index")
@click.argument("filepath", required=False)
@click.option("--file-id")
@click.option(
    "--pagination-mode",
    "pagination_mode",
    cls=Renamed,
    old=("--mode",),
    type=click.Choice(["lines", "chars", "chunks"]),
    default="lines",
    show_default=True,
)
@click.option("--start", type=int, default=0, show_default=True)
@click.option("--count", type=int)
def get(
    index: str, filepath: str | None, file_id: str | None, pagination_mode: str, start: int, count: int | None
) -> None:
    """Print a page of a document of INDEX (by FILEPATH or --file-id)."""
    mode = None if pagination_mode == "chunks" else pagination_mode
    run(
        lambda ws: ws.document_index(
            "GET_DOCUMENT",
            index_name=index,
            filepath=filepath,
            file_id=file_id,
            pagination_mode=mode,
            start=start,
            count=count,
        ),
        _render_get,
    )


@docs_group.command("rm")
@click.argument("index")
@click.argument("filepath", required=False)
@click.option("--file-id")
def rm(index: str, filepath: str | None, file_id: str | None) -> None:
    """Delete a document from INDEX (by FILEPATH or --file-id)."""
    run(lambda ws: ws.document_index("DELETE_DOCUMENT", index_name=index, filepath=filepath, file_id=file_id))


@docs_group.command("mv")
@click.argument("index")
@click.argument("filepath")
@click.argument("new_filename")
def mv(index: str, filepath: str, new_filename: str) -> None:
    """Rename the last path segment of a document (its folder stays)."""
    run(
        lambda ws: ws.document_index(
            "RENAME_DOCUMENT", index_name=index, filepath=filepath, new_filename=new_filename
        )
    )


def register(group: click.Group) -> None:
    group.add_command(docs_group)
