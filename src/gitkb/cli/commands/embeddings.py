"""gitkb embeddings status|build|reembed|use, and the vector wait other commands share."""

from __future__ import annotations

import sys
from typing import Any

import click

from gitkb.cli.main import run
from gitkb.cli.output import is_tty, table


class _Bar:
    """A click progress bar on stderr, only on a terminal; callable as ``progress(done, total)``."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.bar: Any = None

    def __call__(self, done: int, total: int, *_: Any) -> None:
        if not is_tty() or total <= 0:
            return
        if self.bar is None:
            self.bar = click.progressbar(length=total, label=self.label, file=sys.stderr)
            self.bar.__enter__()
        if total != self.bar.length:
            self.bar.length = total
        self.bar.update(max(done - self.bar.pos, 0))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def wait_for_vectors(ws: Any, data: dict[str, Any]) -> dict[str, Any]:
    """After a write: block until its vectors are stored, with a progress bar; fold warnings into ``data``."""
    if not data.get("Success"):
        return data
    bar = _Bar("embedding")
    try:
        built = ws.build_embeddings(progress=bar)
    finally:
        bar.close()
    if not built.get("Success"):
        data.setdefault("Warnings", []).append(
            f"vectors not built ({built.get('Error')}); keyword search works, retry with `gitkb embeddings build`"
        )
    else:
        data["embeddings"] = {k: built.get(k) for k in ("chunks_embedded", "chunks_reused", "cost")}
        data.setdefault("Warnings", []).extend(built.get("Warnings") or [])
    if not data["Warnings"]:
        del data["Warnings"]
    return data


@click.group("embeddings")
def embeddings_group() -> None:
    """Embedding identity, vector status, building and re-embedding."""


def _render_status(data: dict[str, Any]) -> None:
    click.echo(f"identity:    {data.get('identity') or '(none)'}  [{data['EmbeddingIdentityState'].get('source')}]")
    click.echo(f"provider:    {data.get('provider')}   model: {data.get('model')}   fingerprint: {data.get('fingerprint')}")
    click.echo(f"available:   {'yes' if data.get('available') else 'no'}" + (f" ({data['error']})" if data.get("error") else ""))
    click.echo(f"path:        {data.get('path')}")
    click.echo(f"chunks:      {data.get('chunk_count')}  waiting for vectors: {data.get('pending_embeddings')}")
    cols = data.get("collections") or []
    if cols:
        click.echo(table([(c["name"], c["fingerprint"], c["count"]) for c in cols], ["collection", "fingerprint", "vectors"]))
    idx = data.get("indexes") or {}
    if idx:
        rows = [(n, s["chunk_count"], s["vectors"], s.get("embedding_identity"), s.get("needs_reindex")) for n, s in idx.items()]
        click.echo(table(rows, ["index", "chunks", "vectors", "identity", "needs_reindex"]))


@embeddings_group.command("status")
def status() -> None:
    """Provider, identity, chunk counts per collection, vector store path."""
    run(lambda ws: ws.embeddings_status(), _render_status)


def _render_build(data: dict[str, Any]) -> None:
    cost = data.get("cost") or {}
    click.echo(f"{data.get('Message')} ({cost.get('texts', 0)} texts, {cost.get('tokens', 0)} tokens, {cost.get('seconds', 0)} s)")


@embeddings_group.command("build")
@click.option("--force", is_flag=True, help="Drop the vectors and embed every chunk again.")
def build(force: bool) -> None:
    """Embed every chunk that has no vector yet (waits, with a progress bar)."""

    def call(ws: Any) -> dict[str, Any]:
        bar = _Bar("embedding")
        try:
            return ws.build_embeddings(force=force, progress=bar)  # type: ignore[no-any-return]
        finally:
            bar.close()

    run(call, _render_build)


@embeddings_group.command("reembed")
@click.option("--index", "index_name", help="Only this index (default: every index stranded by a model change).")
def reembed(index_name: str | None) -> None:
    """Re-embed from the catalog's text into the active identity's collection."""

    def call(ws: Any) -> dict[str, Any]:
        bar = _Bar("re-embedding")
        try:
            return ws.reembed(index_name, progress=bar)  # type: ignore[no-any-return]
        finally:
            bar.close()

    run(call, _render_build)


@embeddings_group.command("use")
@click.argument("provider")
@click.argument("model", required=False)
def use(provider: str, model: str | None) -> None:
    """Make PROVIDER/MODEL the active identity (indexes embedded with another need `reembed`)."""
    run(lambda ws: ws.set_embedding_identity(provider, model))


def register(group: click.Group) -> None:
    group.add_command(embeddings_group)

