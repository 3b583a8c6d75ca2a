"""gitkb backup FILE, gitkb restore FILE DIR"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import click

from gitkb.cli.output import table
from gitkb.cli.progress import Bar
from gitkb.cli.runner import report, run


class _Bars:
    """One bar per stage the library reports (``progress(done, total, stage)``)."""

    def __init__(self) -> None:
        self.bars: dict[str, Bar] = {}

    def __call__(self, done: int, total: int, stage: str = "", *_: Any) -> None:
        if stage not in self.bars:
            for bar in self.bars.values():
                bar.close()
            self.bars[stage] = Bar(stage or "working")
        self.bars[stage](done, total)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def _holdings(d: dict[str, Any]) -> None:
    tables = d.get("tables") or {}
    click.echo(table([(name, n) for name, n in sorted(tables.items()) if n], ["table", "rows"]))
    if empty := sorted(name for name, n in tables.items() if not n):
        click.echo(f"and {len(empty)} empty table(s): {', '.join(empty)}")
    for s in d.get("sources") or []:
        refs = s.get("refs") or {}
        click.echo(f"source {s['name']} ({s['source_id']}): {len(refs)} ref(s), tracked branch {s['branch']}")
    for b in d.get("proposal_branches") or []:
        click.echo(f"  proposal branch {b}")


def _render_backup(d: dict[str, Any]) -> None:
    _holdings(d)
    click.echo(f"sha256 {d['sha256']}  (also in {d['checksum_file']})")
    click.echo(d.get("Message", ""))


def _render_restore(d: dict[str, Any]) -> None:
    _holdings(d)
    emb = d.get("embeddings") or {}
    if emb:
        click.echo(
            f"vectors: {emb.get('chunks_had_vector') or 0} kept from the vector store, "
            f"{emb.get('chunks_reused') or 0} reused, {emb.get('chunks_embedded') or 0} embedded"
        )
    for diff in d.get("differences") or []:
        click.echo(f"  differs: {diff['kind']} ({diff['count']}) in {diff['store']}")
    click.echo(d.get("Message", ""))


@click.command("backup")
@click.argument("file", type=click.Path(dir_okay=False))
def backup(file: str) -> None:
    """Write one archive of the workspace (catalog, gitkb.toml, the clones' branches) while it runs.

    The keyword index and vectors are not copied: `gitkb restore` rebuilds them."""
    bars = _Bars()
    try:
        run(lambda ws: ws.backup(str(Path(file).absolute()), progress=bars), _render_backup)
    finally:
        bars.close()


@click.command("restore")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--sha256", help="The archive's sha256 as `gitkb backup` printed it.")
@click.option(
    "--catalog-url",
    help="Restore the catalog into this PostgreSQL database (no gitkb rows in it); default: SQLite in DIRECTORY.",
)
@click.option(
    "--new-workspace-id",
    is_flag=True,
    help="Give the restored workspace an id of its own: its vectors are embedded again into its own "
    "collections, so it can run beside the original on the same Chroma server.",
)
def restore(
    file: str, directory: str, sha256: str | None, catalog_url: str | None, new_workspace_id: bool
) -> None:
    """Make a new workspace at DIRECTORY (absent or empty) from an archive; rebuild its indexes."""
    target = Path(directory).expanduser().absolute()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise click.UsageError(
            f"{target} is not empty; restore only into an empty or absent directory (nothing was written)"
        )
    from gitkb.workspace import Workspace  # heavy: tantivy, pygit2
    from gitkb.workspace.backup_tools import Operator  # heavy: pygit2

    bars = _Bars()
    try:  # no workspace is open: the local operator calls it (the policy is asked all the same)
        operator = cast(Workspace, Operator(Workspace))
        data = Workspace.restore(
            operator,
            str(Path(file).absolute()),
            str(target),
            sha256,
            progress=bars,
            catalog_url=catalog_url,
            new_workspace_id=new_workspace_id,
        )
    finally:
        bars.close()
    report(data, _render_restore)


def register(group: click.Group) -> None:
    group.add_command(backup)
    group.add_command(restore)
