"""gitkb propose SOURCE PATH ... and gitkb proposals list|show|discard"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gitkb.cli.output import table
from gitkb.cli.paging import page_options, with_more
from gitkb.cli.runner import run


def _render_staged(data: dict[str, Any]) -> None:
    click.echo(data.get("Message", ""))
    if data.get("diff"):
        click.echo(data["diff"], nl=False)


@click.command("propose")
@click.argument("source")
@click.argument("path")
@click.option(
    "--content-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The whole new file ('-' is not accepted; pass a file).",
)
@click.option("--search", help="Text that occurs exactly once in the file.")
@click.option("--replace", default="", help="Replacement for --search (empty deletes it).")
@click.option("--delete", "delete_", is_flag=True, help="Propose deleting PATH.")
@click.option("--rename-to", help="Propose renaming PATH to this path.")
@click.option("--note", default="", help="Why: goes into the commit message body.")
def propose(
    source: str,
    path: str,
    content_file: Path | None,
    search: str | None,
    replace: str,
    delete_: bool,
    rename_to: str | None,
    note: str,
) -> None:
    """Stage a change to PATH (relative to the documents root) of SOURCE."""
    modes = [content_file is not None, search is not None, delete_, rename_to is not None]
    if sum(modes) != 1:
        raise click.UsageError("give exactly one of --content-file, --search, --delete or --rename-to")
    if delete_:
        run(lambda ws: ws.propose_kb_delete(source, path, note), _render_staged)
    elif rename_to is not None:
        run(lambda ws: ws.propose_kb_rename(source, path, rename_to, note), _render_staged)
    elif content_file is not None:
        try:
            text = content_file.read_bytes().decode("utf-8")  # its line ends as they are (read_text: LF)
        except UnicodeDecodeError as exc:
            raise click.UsageError(f"{content_file} is not UTF-8 text: {exc}") from None
        if not text:
            raise click.UsageError(f"{content_file} is empty; to remove the file use --delete")
        run(lambda ws: ws.propose_kb_edit(source, path, content=text, note=note), _render_staged)
    else:
        run(
            lambda ws: ws.propose_kb_edit(source, path, search=search or "", replace=replace, note=note),
            _render_staged,
        )


@click.group("proposals")
def proposals_group() -> None:
    """Staged proposals: list, show, discard."""


def _render_list(data: dict[str, Any]) -> None:
    rows = [
        (
            p["proposal_id"],
            p["source"],
            p["op"],
            p["path"] + (f" -> {p['new_path']}" if p["new_path"] else ""),
            p["state"],
            (p["note"] or "")[:40],
        )
        for p in data.get("Proposals", [])
    ]
    if not rows:
        click.echo("No proposals.")
        return
    click.echo(table(rows, ["id", "source", "op", "path", "state", "note"]))


@proposals_group.command("list")
@click.option("--source", help="Only this source.")
@click.option(
    "--state",
    default="staged",
    show_default=True,
    type=click.Choice(["staged", "merged", "discarded", "conflict", "all"]),
)
@page_options
def list_(source: str | None, state: str, start: int | None, count: int | None) -> None:
    """List proposals, a page at a time (100 by default)."""
    run(lambda ws: ws.list_proposals(source, state, start=start, count=count), with_more(_render_list))


@proposals_group.command("show")
@click.argument("proposal_id")
def show(proposal_id: str) -> None:
    """Show a proposal and its diff."""
    run(lambda ws: ws.show_proposal(proposal_id), _render_staged)


@proposals_group.command("discard")
@click.argument("proposal_id")
def discard(proposal_id: str) -> None:
    """Drop a staged proposal from the proposal branch (later ones are kept)."""
    run(lambda ws: ws.discard_proposal(proposal_id))


def _render_refresh(data: dict[str, Any]) -> None:
    click.echo(data.get("Message", ""))
    for p in data.get("Proposals", []):
        click.echo(
            f"  {p['result']:<8} {p['proposal_id']}  {p['path']}"
            + (f": {p['reason']}" if p.get("reason") else "")
        )
        for ln in p.get("current_lines", []):
            click.echo(f"      {ln['line']:>5} | {ln['text']}")
        for step in p.get("next_steps", []):
            click.echo(f"    next: {step}")


@proposals_group.command("refresh")
@click.argument("source")
def refresh(source: str) -> None:
    """Make SOURCE's staged proposals again on its branch's head now (after a direct commit moved it)."""
    run(lambda ws: ws.refresh_proposals(source), _render_refresh)


def register(group: click.Group) -> None:
    group.add_command(propose)
    group.add_command(proposals_group)
