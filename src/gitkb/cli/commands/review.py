"""gitkb review list|show|approve|deny"""

from __future__ import annotations

import getpass
from typing import Any

import click

from gitkb.cli.commands.pr import render_files
from gitkb.cli.output import table
from gitkb.cli.paging import page_options, with_more
from gitkb.cli.runner import run


def _me() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


@click.group("review")
def review_group() -> None:
    """The gate in front of every push: approve or deny what an agent staged."""


def _render_list(data: dict[str, Any]) -> None:
    rows = [
        (
            r["review_id"],
            r["review_state"],
            r["source"],
            r["number"] or "",
            len(r["changed_files"]),
            r["title"],
            r["requested_by"] or "",
        )
        for r in data.get("Reviews", [])
    ]
    if not rows:
        click.echo("No reviews.")
        return
    click.echo(table(rows, ["id", "state", "source", "pr", "files", "title", "requested by"]))


@review_group.command("list")
@click.option(
    "--state",
    type=click.Choice(["pending", "approved", "denied", "closed", "merged", "superseded", "all"]),
    help="Only this state.",
)
@click.option("--source", help="Only this source.")
@page_options
def list_(state: str | None, source: str | None, start: int | None, count: int | None) -> None:
    """List reviews, pending first, a page at a time (100 by default)."""
    run(lambda ws: ws.list_reviews(state, source, start=start, count=count), with_more(_render_list))


def _render_show(data: dict[str, Any]) -> None:
    click.echo(
        f"{data['review_id']}  {data['review_state']}  {data['source']}  {data['branch']} -> {data['base_branch']}"
    )
    click.echo(f"title: {data['title']}")
    click.echo(f"requested by: {data.get('requested_by') or 'unknown'}")
    overwrites = data.get("overwrites") or []
    if overwrites and not data.get("pushed"):
        click.echo(f"overwrites {len(overwrites)} commit(s) gitkb did not push (approve needs --overwrite):")
        for c in overwrites:
            click.echo(f"  {c['sha'][:12]}  {c['author']}  {c['message']}")
    if data.get("reason"):
        click.echo(f"reason: {data['reason']}")
    if data.get("push_error"):
        click.echo(f"not pushed: {data['push_error']}")
    render_files(data.get("changed_files") or [])
    if data.get("diff"):
        click.echo(data["diff"], nl=False)


@review_group.command("show")
@click.argument("review_id")
def show(review_id: str) -> None:
    """Show what approving REVIEW_ID would push: files and diff."""
    run(lambda ws: ws.show_review(review_id), _render_show)


def _render_approved(data: dict[str, Any]) -> None:
    click.echo(data.get("Message", ""))
    click.echo(f"number: {data['number']}  url: {data['url']}  review_state: {data['review_state']}")
    render_files(data.get("changed_files") or [])


@review_group.command("approve")
@click.argument("review_id")
@click.option("--reviewer", default=_me, show_default="your user name", help="Recorded in the audit log.")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace the commits others pushed to the proposal branch that `review show` lists.",
)
def approve(review_id: str, reviewer: str, overwrite: bool) -> None:
    """Approve: push the staged branch with a lease and open or update the PR/MR.

    If the push would overwrite commits gitkb did not push, it is refused unless --overwrite."""
    run(lambda ws: ws.approve_review(review_id, reviewer=reviewer, overwrite=overwrite), _render_approved)


@review_group.command("deny")
@click.argument("review_id")
@click.option("--reason", required=True, help="Why; recorded and shown to whoever proposed it.")
@click.option("--reviewer", default=_me, show_default="your user name", help="Recorded in the audit log.")
def deny(review_id: str, reason: str, reviewer: str) -> None:
    """Deny: nothing is pushed; the proposals stay staged until discarded."""
    run(lambda ws: ws.deny_review(review_id, reason, reviewer=reviewer))


def register(group: click.Group) -> None:
    group.add_command(review_group)
