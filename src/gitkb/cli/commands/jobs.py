"""gitkb jobs list|get|wait|cancel"""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.commands.embeddings import vectors_line, wait_for_vectors
from gitkb.cli.output import emit_json, table
from gitkb.cli.paging import page_options, with_more
from gitkb.cli.progress import Bar
from gitkb.cli.runner import run


@click.group("jobs")
def jobs_group() -> None:
    """Background jobs of the single writer."""


def _render_list(d: dict[str, Any]) -> None:
    rows = [
        (
            j["job_id"],
            j["kind"],
            j["status"],
            f"{j['progress']['done']}/{j['progress']['total']}",
            j.get("error") or "",
        )
        for j in d.get("Jobs", [])
    ]
    click.echo(table(rows, ["id", "kind", "status", "progress", "error"]) if rows else "No jobs.")


@jobs_group.command("list")
@click.option("--state", type=click.Choice(["queued", "running", "completed", "failed", "cancelled"]))
@click.option("--limit", type=int, default=None, hidden=True, help="The older spelling of --count.")
@page_options
def list_(state: str | None, limit: int | None, start: int | None, count: int | None) -> None:
    """Recent jobs, newest first, a page at a time (50 by default)."""
    if count is not None and limit is not None:  # one of them would be dropped silently
        raise click.UsageError("give --count only (--limit is its older spelling), not both")
    run(
        lambda ws: ws.list_jobs(state=state, start=start, count=count if count is not None else limit),
        with_more(_render_list),
    )


def _render_job(d: dict[str, Any]) -> None:
    p = d.get("progress") or {}
    click.echo(f"{d['job_id']}  {d['kind']}  {d['status']}  {p.get('done')}/{p.get('total')}")
    if d.get("error"):
        click.echo(f"error: {d['error']}")
    if isinstance(d.get("result"), dict) and vectors_line(d["result"]):
        click.echo(vectors_line(d["result"]))  # what became of the vectors of what the job wrote
    if d.get("result") is not None:
        emit_json(d["result"])


@jobs_group.command("get")
@click.argument("job_id")
def get(job_id: str) -> None:
    """Show one job and its result."""
    run(lambda ws: ws.get_job_result(job_id), _render_job)


@jobs_group.command("wait")
@click.argument("job_id")
@click.option("--timeout", type=float, help="Give up waiting after this many seconds.")
def wait(job_id: str, timeout: float | None) -> None:
    """Wait for a job, then for the vectors of what it wrote, a progress bar for each (this process
    runs the job if no writer is up)."""

    def call(ws: Any) -> dict[str, Any]:
        with Bar(f"job {job_id}") as bar:
            data: dict[str, Any] = ws.wait_job(job_id, timeout=timeout, progress=bar)
        result = data.get("result")
        if data.get("Success") and data.get("status") == "completed" and isinstance(result, dict):
            data["result"] = wait_for_vectors(ws, {"Success": True, **result})
            data["result"].pop("Success", None)
        return data

    run(call, _render_job)


@jobs_group.command("cancel")
@click.argument("job_id")
def cancel(job_id: str) -> None:
    """Cancel a queued job, or ask a running one to stop at its next checkpoint."""
    run(lambda ws: ws.cancel_job(job_id), lambda d: click.echo(f"{d['job_id']}: {d['status']}"))


def register(group: click.Group) -> None:
    group.add_command(jobs_group)
