"""A remote caller's work on a source that follows a path of this disk: held to the allowed roots.

A source's url may be a local path or ``file://`` (added from the CLI or the library, where the
operator's rights hold; over HTTP only inside ``[server] allowed_roots``). Every action that
fetches from that url, pushes to it or (the local forge) writes it -- ``reaches_source`` in the
action table: a sync or rollback, proposing, refreshing, asking for and showing a review,
approving (the push) or denying one, discarding a proposal, ``cite_check``, the local forge's merge
and close -- is, for a remote caller (the HTTP API, MCP over HTTP, a webhook), refused
(``forbidden``, ``details.refused_roots`` by source, as a held reindex) before anything is fetched,
pushed or written when the url lies outside those roots (``refuse_call``, asked once where the
Workspace runs a tool; a sync's job checks again when it runs: ``refuse_outside``). A source with a
network url (https, ssh, git) is never refused here.

What an agent is told names no path of this server: ``details.refused_roots`` maps the source's
name to an empty list, no ``allowed_roots``, a fixed sentence for the next step.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitkb.core import action_table, disk_roots
from gitkb.core.errors import Forbidden, GitkbError
from gitkb.services.changes.sources.registry import resolve_source
from gitkb.services.context import Context
from gitkb.stores.catalog import proposals as prop_rows
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.documents import chunk_cids_by_id, chunks_by_cids
from gitkb.stores.catalog.retired import get_retired
from gitkb.stores.catalog.sources import SourceRow

# An agent's next step: the server's paths and configuration are the operator's.
AGENT_STEP = (
    "ask the operator: this source's repository is a folder of the server that remote callers may not"
    " read (it can be used here once it is inside the server's allowed roots or followed by a network url)"
)


def refuse_outside(ctx: Context, source: Any, held_to: tuple[Path, ...] | None) -> SourceRow:
    """The source ``source`` names; with ``held_to`` refused when its url reads this server's disk
    outside those roots (symlinks resolved; a relative path or no root allowed: refused)."""
    row = resolve_source(ctx, source)
    if held_to is not None:
        _refuse(row, held_to, "sync", agent=False)
    return row


def refuse_call(
    ctx: Context,
    action: str,
    param: str,
    value: Any,
    held_to: tuple[Path, ...],
    *,
    visible: Callable[[SourceRow, str | None], bool] | None = None,
) -> None:
    """``action``'s call, its parameter ``param`` = ``value`` naming or implying a source (a source
    or index, a review, a proposal, a chunk): refused when that source's url reads this server's
    disk outside ``held_to``. ``visible`` (an agent's): whether the agent may see that source
    (the row, the chunk's index id): else nothing is said here and the action answers by its own
    rules (unknown and out of scope alike). An argument that names no source is the action's to
    refuse."""
    for row, index_id in _sources_of(ctx, param, value):
        if visible is None or visible(row, index_id):
            _refuse(row, held_to, _what(action), agent=visible is not None)
            return


def reachable(held_to: tuple[Path, ...] | None) -> Callable[[SourceRow], bool] | None:
    """Whether a caller held to ``held_to`` may fetch from a source's url (None: not held: any)."""
    if held_to is None:
        return None
    roots = held_to

    def may(row: SourceRow) -> bool:
        path = disk_roots.local_path(row.url)
        return path is None or disk_roots.inside(path, roots)

    return may


def _refuse(row: SourceRow, held_to: tuple[Path, ...], what: str, *, agent: bool) -> None:
    path = disk_roots.local_path(row.url)
    if path is None or disk_roots.inside(path, held_to):
        return
    nothing = "nothing was fetched" if what == "sync" else "nothing was fetched, pushed or written"
    if agent:
        raise Forbidden(
            f"{what} would read a folder of this server's disk that remote callers may not read"
            f" (source {row.name!r}); {nothing}",
            details={"refused_roots": {row.name: []}},
            next_steps=[AGENT_STEP],
        )
    cli = (
        f"sync from the server's CLI (gitkb source sync {row.name})"
        if what == "sync"
        else f"run {what} from the server's CLI ({_cli(what)}) or the library"
    )
    steps = [
        f"{cli}: it holds the operator's rights",
        "or add the repository's folder to [server] allowed_roots in gitkb.toml",
        "or follow the repository by a network url (https://, ssh://)",
    ]
    raise disk_roots.refusal(what, {row.name: [path]}, held_to, by="source", steps=steps, nothing=nothing)


def _sources_of(ctx: Context, param: str, value: Any) -> list[tuple[SourceRow, str | None]]:
    """The source a call's argument names or implies (a chunk: each index's copy, with its index
    id); none when it names none (the action answers that itself)."""
    conn = ctx.catalog.conn
    if param in ("source", "source_id_or_index"):
        try:
            return [(resolve_source(ctx, value), None)]
        except GitkbError:
            return []
    if not isinstance(value, str) or not value.strip():
        return []
    key = value.strip()
    if param in ("review_id", "proposal_id"):
        got = prop_rows.get_review(conn, key) if param == "review_id" else prop_rows.get_proposal(conn, key)
        row = source_rows.get_by_id(conn, got.source_id) if got is not None else None
        return [(row, None)] if row is not None else []
    if param == "chunk_id":
        return _sources_of_chunk(ctx, key)
    raise ValueError(f"reaches_source names {param!r}: no rule says which source it implies")


def _sources_of_chunk(ctx: Context, chunk_id: str) -> list[tuple[SourceRow, str | None]]:
    """The git source a cited chunk came from (``cite_check``'s: the indexed chunk, else the retired one)."""
    conn = ctx.catalog.conn
    hits = chunks_by_cids(conn, chunk_cids_by_id(conn, chunk_id))
    metas: list[tuple[Any, str]] = [
        (doc.metadata.get("gitkb_source") if isinstance(doc.metadata, dict) else None, doc.index_id)
        for _, doc in hits.values()
    ]
    if not hits and (retired := get_retired(conn, chunk_id)) is not None:
        metas = [(retired.metadata.get("gitkb_source"), retired.index_id)]
    out: list[tuple[SourceRow, str | None]] = []
    for meta, index_id in metas:
        if isinstance(meta, dict) and (row := source_rows.get_by_name(conn, str(meta.get("source")))):
            out.append((row, index_id))
    return out


def _what(action: str) -> str:
    """What the refusal says would read: ``sync`` for an action whose job syncs the source
    (``reads_disk``: a sync, a rollback, the local forge's merge; roots23's words), else the action."""
    spec = action_table.ACTIONS.get(action)
    return "sync" if spec is not None and spec.reads_disk else action


def _cli(action: str) -> str:
    spec = action_table.ACTIONS.get(action)
    return spec.cli if spec is not None and spec.cli else "gitkb"
