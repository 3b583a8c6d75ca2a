"""gitkb index create|list|rename|delete|stats"""

from __future__ import annotations

from typing import Any

import click

from gitkb.cli.commands.embeddings import vectors_line, wait_for_vectors
from gitkb.cli.confirm import confirmed, counted, yes_option
from gitkb.cli.output import table
from gitkb.cli.progress import Bar
from gitkb.cli.runner import run


@click.group("index")
def index_group() -> None:
    """Create, list, rename and delete indexes."""


@index_group.command("create")
@click.argument("name")
@click.option("--chunk-size", type=int, help="Chunk size in word pieces.")
@click.option("--chunk-overlap", type=int, help="Overlap between chunks in word pieces.")
@click.option("--chunk-strategy", type=click.Choice(["sentence", "one_chunk_per_doc", "auto"]))
@click.option("--no-embeddings", is_flag=True, help="Keyword-only: never embed.")
@click.option(
    "--embedding-provider", help="Pin this index to a provider (default: the workspace's active identity)."
)
@click.option("--embedding-model", help="Pin this index to a model of --embedding-provider.")
def create(
    name: str,
    chunk_size: int | None,
    chunk_overlap: int | None,
    chunk_strategy: str | None,
    no_embeddings: bool,
    embedding_provider: str | None,
    embedding_model: str | None,
) -> None:
    """Create index NAME."""
    params: dict[str, Any] = {
        "index_name": name,
        "chunk_size": chunk_size,
        "chunk_overlap": chunk_overlap,
        "chunk_strategy": chunk_strategy,
        "embedding_provider": embedding_provider,
        "embedding_model": embedding_model,
    }
    if no_embeddings:
        params["embeddings"] = False
    run(lambda ws: ws.document_index("CREATE_INDEX", **params))


def _render_list(data: dict[str, Any]) -> None:
    details = data.get("IndexDetails", {})
    rows = [
        (
            n,
            d.get("file_count"),
            d.get("chunk_count"),
            "yes" if d.get("embeddings") else "no",
            d.get("index_id"),
        )
        for n, d in details.items()
    ]
    if not rows:
        click.echo("No indexes yet. Create one with: gitkb index create NAME")
        return
    click.echo(table(rows, ["name", "files", "chunks", "embeddings", "id"]))


@index_group.command("list")
def list_() -> None:
    """List indexes with their statistics."""
    run(lambda ws: ws.document_index("LIST_INDICES"), _render_list)


@index_group.command("rename")
@click.argument("name")
@click.argument("new_name")
def rename(name: str, new_name: str) -> None:
    """Rename index NAME to NEW_NAME (no re-ingest)."""
    run(lambda ws: ws.document_index("RENAME_INDEX", index_name=name, new_index_name=new_name))


def _what_goes(ws: Any, name: str) -> tuple[str, list[str]] | None:
    """What deleting index NAME removes (None when there is no such index)."""
    details = ws.document_index("LIST_INDICES").get("IndexDetails") or {}
    found = [(n, d) for n, d in details.items() if name in (n, d.get("index_id"))]
    if not found:
        return None
    real, d = found[0]
    goes = [
        counted(d.get("file_count"), "document(s)"),
        counted(d.get("chunk_count"), "chunk(s) with their keyword entries"),
    ]
    if d.get("embeddings"):
        emb = ws.embeddings_status()
        state = ((emb.get("indexes") or {}).get(real) or {}).get("vectors") if emb.get("Success") else None
        ready = state == "ready"  # every chunk has its vector
        goes.append(
            counted(d.get("chunk_count"), "vector(s)") if ready else f"the vectors of its chunks ({state})"
        )
    return f"index {real!r}", goes


@index_group.command("delete")
@click.argument("name")
@yes_option
def delete(name: str, yes: bool) -> None:
    """Delete index NAME with its documents, chunks and vectors (asks first; --yes does not)."""
    act = lambda ws: ws.document_index("DELETE_INDEX", index_name=name)  # noqa: E731
    run(
        confirmed(
            yes,
            f"index {name!r} with its documents, chunks and vectors",
            lambda ws: _what_goes(ws, name),
            act,
        )
    )


def _render_stats(data: dict[str, Any]) -> None:
    rows = []
    for n, s in data.get("Stats", {}).items():
        cfg = s.get("chunk_config") or {}
        rows.append(
            (
                n,
                s.get("file_count"),
                s.get("chunk_count"),
                s.get("needs_reindex"),
                f"{cfg.get('chunk_strategy')}/{cfg.get('chunk_size')}/{cfg.get('chunk_overlap')}",
            )
        )
    click.echo(
        table(rows, ["name", "files", "chunks", "needs_reindex", "chunking"]) if rows else "No indexes yet."
    )


@index_group.command("stats")
def stats() -> None:
    """Per-index file counts, chunk configuration and reindex needs."""
    run(lambda ws: ws.document_index("GET_INDICES_STATS"), _render_stats)


def _render_rechunk(data: dict[str, Any]) -> None:
    click.echo(data.get("Message", ""))

    if vectors_line(data):
        click.echo(vectors_line(data))


@index_group.command("rechunk")
@click.argument("name")
@click.option(
    "--chunk-size", type=int, help="Chunk size in word pieces (default: the index's, then the core default)."
)
@click.option("--chunk-overlap", type=int, help="Overlap between chunks in word pieces.")
@click.option("--chunk-strategy", type=click.Choice(["sentence", "one_chunk_per_doc", "auto"]))
@click.option(
    "--no-wait", is_flag=True, help="Return once searchable by keyword; vectors follow in the background."
)
def rechunk(
    name: str, chunk_size: int | None, chunk_overlap: int | None, chunk_strategy: str | None, no_wait: bool
) -> None:
    """Cut every document of index NAME again (in a temporary index, swapped in at the end)."""

    def call(ws: Any) -> dict[str, Any]:
        with Bar("re-chunking") as bar:
            data: dict[str, Any] = ws.document_index(
                "RECHUNK",
                index_name=name,
                chunk_size=chunk_size,
                chunk_overlap=chunk_overlap,
                chunk_strategy=chunk_strategy,
                progress=bar,
            )
        return data if no_wait else wait_for_vectors(ws, data)

    run(call, _render_rechunk)


SEARCH_KEYS = ("fusion", "semantic_weight", "rrf_k", "bm25_k1", "bm25_b")


def _render_tune(data: dict[str, Any]) -> None:
    origin = data.get("from") or {}
    rows = [(k, v, origin.get(k, "")) for k, v in (data.get("effective") or {}).items()]
    click.echo(f"{data.get('index_name')}: how it is ranked")
    click.echo(table(rows, ["setting", "value", "from"]))


@index_group.command("tune")
@click.argument("name")
@click.option("--fusion", type=click.Choice(["score", "rrf"]), help="Hybrid: normalised score fusion or RRF.")
@click.option("--semantic-weight", type=float, help="Score fusion: weight of the semantic list, 0..1.")
@click.option("--rrf-k", type=float, help="RRF: k in 1 / (k + rank).")
@click.option("--bm25-k1", type=float, help="BM25 term-frequency saturation (tantivy's own: 1.2).")
@click.option("--bm25-b", type=float, help="BM25 length normalisation, 0..1 (tantivy's own: 0.75).")
@click.option(
    "--unset", "unset", multiple=True, type=click.Choice(SEARCH_KEYS), help="Drop this setting (repeatable)."
)
@click.option("--reset", is_flag=True, help="Drop all of the index's own search settings first.")
def tune(name: str, unset: tuple[str, ...], reset: bool, **values: float | str | None) -> None:
    """Show or set how index NAME is ranked (its own search settings over gitkb.toml's [search])."""
    given: dict[str, Any] = {k: v for k, v in values.items() if v is not None}
    given.update({k: None for k in unset})
    if not given and not reset:
        run(lambda ws: ws.document_index("GET_SEARCH_SETTINGS", index_name=name), _render_tune)
        return
    run(
        lambda ws: ws.document_index(
            "SET_SEARCH_SETTINGS", index_name=name, settings=given or None, reset=reset
        ),
        _render_tune,
    )


def register(group: click.Group) -> None:
    group.add_command(index_group)
