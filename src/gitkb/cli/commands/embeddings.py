"""gitkb embeddings status|build|reembed|use, and the vector wait other commands share."""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.output import table
from gitkb.cli.progress import Bar
from gitkb.cli.runner import run


def wait_for_vectors(ws: Any, data: dict[str, Any]) -> dict[str, Any]:
    """After a write: block until the vectors of the chunks it wrote are stored, with a progress
    bar; put their true counts under ``embeddings``, fold warnings into ``data``."""
    if not data.get("Success") or data.get("vectors") != "pending":
        return data  # nothing to wait for (keyword-only, unchanged, or already stored)
    bar = Bar("embedding")
    try:
        built = ws.wait_for_vectors(data["vectors_range"], progress=bar)
    finally:
        bar.close()
    if not built.get("Success"):
        data.setdefault("Warnings", []).append(
            f"vectors not built ({built.get('Error')}); keyword search works, retry with `gitkb embeddings build`"
        )
    else:
        data["embeddings"] = {
            k: built.get(k)
            for k in ("vectors", "chunks_embedded", "chunks_reused", "chunks_had_vector", "cost")
        }
        data["vectors"] = built.get("vectors", data["vectors"])
        for k in ("vectors_pending", "vectors_total"):
            data.pop(k, None)
        data.setdefault("Warnings", []).extend(built.get("Warnings") or [])
    if not data["Warnings"]:
        del data["Warnings"]
    return data


def vectors_line(data: dict[str, Any]) -> str:
    """One line on what became of a write's vectors ("" when it wrote none that need one)."""
    emb = data.get("embeddings") or (data if data.get("vectors") == "ready" else None)
    if emb:
        line = f"vectors: {emb.get('chunks_embedded', 0)} chunk(s) embedded, {emb.get('chunks_reused', 0)} reused"
        return line + (
            f", {emb['chunks_had_vector']} already had one" if emb.get("chunks_had_vector") else ""
        )
    if data.get("vectors") == "pending":
        return (
            f"vectors: not waited for; {data.get('vectors_pending')} chunk(s) get theirs in the background"
            " (`gitkb status` shows the progress, `gitkb embeddings build` waits for them)"
        )
    return ""


@click.group("embeddings")
def embeddings_group() -> None:
    """Embedding identity, vector status, building and re-embedding."""


def _render_status(data: dict[str, Any]) -> None:
    click.echo(
        f"identity:    {data.get('identity') or '(none)'}  [{data['EmbeddingIdentityState'].get('source')}]"
    )
    click.echo(
        f"provider:    {data.get('provider')}   model: {data.get('model')}   fingerprint: {data.get('fingerprint')}"
    )
    click.echo(
        f"available:   {'yes' if data.get('available') else 'no'}"
        + (f" ({data['error']})" if data.get("error") else "")
    )
    click.echo(f"path:        {data.get('path')}")
    click.echo(
        f"chunks:      {data.get('chunk_count')}  waiting for vectors: {data.get('pending_embeddings')}"
    )
    cols = data.get("collections") or []
    if cols:
        click.echo(
            table(
                [(c["name"], c["fingerprint"], c["count"]) for c in cols],
                ["collection", "fingerprint", "vectors"],
            )
        )
    idx = data.get("indexes") or {}
    if idx:
        rows = [
            (n, s["chunk_count"], s["vectors"], s.get("embedding_identity"), s.get("needs_reindex"))
            for n, s in idx.items()
        ]
        click.echo(table(rows, ["index", "chunks", "vectors", "identity", "needs_reindex"]))


@embeddings_group.command("status")
def status() -> None:
    """Provider, identity, chunk counts per collection, vector store path."""
    run(lambda ws: ws.embeddings_status(), _render_status)


def _render_build(data: dict[str, Any]) -> None:
    cost = data.get("cost") or {}
    click.echo(
        f"{data.get('Message')} ({cost.get('texts', 0)} texts, {cost.get('tokens', 0)} tokens, "
        f"{cost.get('seconds', 0)} s of model time)"
    )


@embeddings_group.command("build")
@click.option("--force", is_flag=True, help="Drop the vectors and embed every chunk again.")
def build(force: bool) -> None:
    """Embed every chunk that has no vector yet (waits, with a progress bar)."""

    def call(ws: Any) -> dict[str, Any]:
        bar = Bar("embedding")
        try:
            return ws.build_embeddings(force=force, progress=bar)  # type: ignore[no-any-return]
        finally:
            bar.close()

    run(call, _render_build)


@embeddings_group.command("reembed")
@click.option(
    "--index", "index_name", help="Only this index (default: every index stranded by a model change)."
)
def reembed(index_name: str | None) -> None:
    """Re-embed from the catalog's text into the active identity's collection."""

    def call(ws: Any) -> dict[str, Any]:
        bar = Bar("re-embedding")
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
