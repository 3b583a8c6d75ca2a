"""gitkb pr open|list"""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.names import Renamed
from gitkb.cli.output import table
from gitkb.cli.runner import run


@click.group("pr")
def pr_group() -> None:
    """Pull/merge requests of a source's staged proposals (opened only after a review is approved)."""


def render_files(files: list[dict[str, str]]) -> None:
    for f in files:
        old = f" (from {f['old_path']})" if f.get("old_path") else ""
        click.echo(f"  {f['status']}  {f['path']}{old}")


def _render_open(data: dict[str, Any]) -> None:
    click.echo(data.get("Message", ""))
    click.echo(f"review_id: {data['review_id']}  review_state: {data['review_state']}")
    render_files(data.get("changed_files") or [])


@pr_group.command("open")
@click.argument("source")
@click.option("--title", default="", help="PR/MR title (default: from the proposals).")
@click.option("--body", default="", help="PR/MR description (default: the proposals and their notes).")
@click.option(
    "--commit-message", default="", help="Squash the staged proposals into one commit with this message."
)
@click.option(
    "--target-index", default="", help="The index the change is for, when the source feeds several."
)
@click.option(
    "--proposal-id",
    "proposal_ids",
    cls=Renamed,
    old=("--proposal",),
    multiple=True,
    help="Review only this staged proposal (repeatable).",
)
def open_(
    source: str, title: str, body: str, commit_message: str, target_index: str, proposal_ids: tuple[str, ...]
) -> None:
    """Ask for review of SOURCE's staged proposals; nothing is pushed until it is approved."""
    run(
        lambda ws: ws.open_kb_pull_request(
            source,
            target_index=target_index,
            title=title,
            body=body,
            commit_message=commit_message,
            proposal_ids=list(proposal_ids) or None,
        ),
        _render_open,
    )


def _render_list(data: dict[str, Any]) -> None:
    rows = [
        (c["number"], c["state"], c["head"], c["base"], c["title"], c["url"])
        for c in data.get("PullRequests", [])
    ]
    if not rows:
        click.echo(f"No change requests for {data.get('source')} yet.")
        return
    click.echo(table(rows, ["number", "state", "head", "base", "title", "url"]))


@pr_group.command("list")
@click.argument("source")
@click.option(
    "--state", type=click.Choice(["open", "closed", "merged"]), help="Only this state (local forge)."
)
def list_(source: str, state: str | None) -> None:
    """List the change requests gitkb opened for SOURCE."""
    run(lambda ws: ws.list_pull_requests(source, state), _render_list)


def register(group: click.Group) -> None:
    group.add_command(pr_group)
