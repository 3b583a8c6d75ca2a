"""gitkb status · gitkb reindex"""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.commands.embeddings import vectors_line, wait_for_vectors
from gitkb.cli.progress import Bar, job_line
from gitkb.cli.runner import run


def _render_status(d: dict[str, Any]) -> None:
    click.echo(f"status:            {d['status']}" + ("  (caught up)" if d.get("caught_up") else ""))
    click.echo(f"documents indexed: {d['documents_indexed']}")
    click.echo(f"queue depth:       {d['queue_depth']}")
    job = d.get("in_flight_job")
    if job:
        p = job.get("progress") or {}
        total = p.get("total")
        click.echo(
            f"in flight:         {d['in_flight']} {job.get('job_id') or '(background)'} "
            f"({p.get('done') or 0}/{'?' if total is None else total})"
            + (f" {p['note']}" if p.get("note") else "")
        )
    else:
        click.echo("in flight:         -")
    click.echo(f"dirty paths:       {d['dirty_paths']}")
    click.echo(f"dirty embeddings:  {d['dirty_embeddings']}")
    click.echo(f"write generation:  {d['write_generation']}")
    cat = d.get("catalog") or {}
    click.echo(f"catalog:           {cat.get('engine', '?')} {cat.get('url') or cat.get('path') or ''}")
    retired = d.get("retired_chunks")
    if retired:  # chunks that left an index, kept [catalog] retired_days for old citations
        click.echo(f"retired chunks:    {retired['rows']} (kept {retired['retention_days']:g} days)")
    kept = d.get("jobs")
    if kept:  # the queue's table: finished jobs kept [catalog] jobs_days
        click.echo(
            f"jobs:              {kept['rows']} ({kept['finished']} finished, kept {kept['retention_days']} days;"
            f" {kept['pruned']} removed)"
        )
    for key in ("error", "last_reindex_error", "last_build_embeddings_error"):
        if d.get(key):
            click.echo(f"{key.replace('_', ' ')}: {d[key]}")
    skipped = d.get("skipped_files") or []
    if skipped:
        click.echo(f"skipped files ({len(skipped)}):")
        for s in skipped[:20]:
            click.echo(f"  {s['path']}: {s['category']} ({s['detail']})")


@click.command("status")
def status() -> None:
    """Is the index current? Queue, in-flight job, dirty counts, skipped files."""
    run(lambda ws: ws.get_index_status(), _render_status)


def _render_reindex(d: dict[str, Any]) -> None:
    click.echo(d.get("Message", ""))
    paths = d.get("paths") or {}
    for key in ("deleted", "left_out"):
        shown = paths.get(key) or []
        for path in shown[:20]:
            click.echo(f"  {key.replace('_', ' ')} {path}")
        if len(shown) > 20:
            click.echo(f"  ... and {len(shown) - 20} more {key.replace('_', ' ')}")
    for s in paths.get("skipped") or []:
        if s.get("category") != "excluded":
            click.echo(f"  skipped {s['path']}: {s['category']} ({s['detail']})")

    if vectors_line(d):
        click.echo(vectors_line(d))


@click.command("reindex")
@click.option("--force", is_flag=True, help="Parse every file again and rebuild the keyword index.")
@click.option("--index", "index_name", help="Only this index.")
@click.option(
    "--no-wait", is_flag=True, help="Queue the job and return its id (follow it with `gitkb jobs wait ID`)."
)
def reindex(force: bool, index_name: str | None, no_wait: bool) -> None:
    """Bring directory-fed indexes up to date with files changed on disk, then wait for their vectors."""
    if no_wait:
        run(lambda ws: ws.promoted("reindex", force=force, index_name=index_name, wait=0), _render_queued)
        return

    def call(ws: Any) -> dict[str, Any]:
        with Bar("reindexing") as bar:
            data: dict[str, Any] = ws.reindex(force=force, index_name=index_name, progress=bar)
        return wait_for_vectors(ws, data)

    run(call, _render_reindex)


def _render_queued(d: dict[str, Any]) -> None:
    if d.get("status") == "working":
        click.echo(job_line(d))
    else:  # it finished at once
        _render_reindex(d)


def register(group: click.Group) -> None:
    group.add_command(status)
    group.add_command(reindex)
