"""get_index_status counted over some indexes only: what an agent's answer says of its own indexes.

``index_status`` counts the whole workspace. ``status_of_indexes(ctx, index_ids)`` gives the same
keys (``status``, ``caught_up``, ``error``, ``queue_depth``, ``in_flight``, ``dirty_paths``,
``dirty_embeddings``) counted over ``index_ids``, so an agent bound to index A neither sees nor
waits on work queued for index B:

* a job is for the indexes it names (``index_name`` / ``indexes`` of the job or of its action, by
  name or id; the indexes a ``source`` feeds). A name no index has now (an index being created,
  a deleted one) is for none of them. A job naming no index (a reindex of every index,
  ``build_embeddings``, ``purge_expired``) is for every index; a workspace-wide vector build (the
  job or the background embedder) only while these indexes have chunks waiting for a vector.
* dirty paths and embeddings are the change-log entries and waiting chunks of these indexes;
* ``status`` is ``building`` while a building job for them runs, ``failed`` when the last build
  finished for them failed (looked for among the last ``FINISHED_SCAN`` finished builds), or the
  keyword index is damaged (every index's searches fail).

No index (an agent bound to nothing live): no job is for it and every count is 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from gitkb.core.errors import GitkbError
from gitkb.services.changes.sources.registry import resolve_source
from gitkb.services.context import Context
from gitkb.services.derived.vector_locks import running_builds
from gitkb.services.derived.vector_wants import pending_chunks, wanted_identities
from gitkb.services.operations.status import BUILD_KINDS, BUILDING_ACTIONS, EMBEDDING_KINDS
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import jobs as job_rows
from gitkb.stores.catalog.jobs import JobRow
from gitkb.stores.keyword_schema import REPAIR

FINISHED_PAGE = 100  # finished build jobs read at a time while looking for the last one of these indexes
FINISHED_SCAN = 1000  # and at most this many: an older failure no later build touched is not reported


@dataclass
class JobTargets:
    """Which jobs are for ``ids``: ``ids_by_ref`` maps every index's name and id to its id, and the
    indexes each ``source`` a job names feeds are read once per answer."""

    ctx: Context
    ids: frozenset[str]
    ids_by_ref: dict[str, str]
    fed: dict[str, frozenset[str]] = field(default_factory=dict)

    def indexes(self, job: JobRow) -> frozenset[str] | None:
        """The ids of the indexes ``job`` works on; None when it names none (it is for every index)."""
        params = job.params
        if job.kind == "action":
            inner = params.get("params")
            params = inner if isinstance(inner, dict) else {}
        named = False
        out: set[str] = set()
        for key in ("index_name", "indexes"):
            value = params.get(key)
            if value in (None, "", []):
                continue
            named = True
            for ref in value if isinstance(value, list | tuple) else [value]:
                if isinstance(ref, str) and ref in self.ids_by_ref:
                    out.add(self.ids_by_ref[ref])
        source = params.get("source") if job.kind != "action" else None
        if isinstance(source, str) and source:
            named = True
            out |= self._fed_by(source)
        return frozenset(out) if named else None

    def _fed_by(self, source: str) -> frozenset[str]:
        if source not in self.fed:
            self.fed[source] = frozenset()
            with contextlib.suppress(GitkbError):  # a source removed since feeds nothing now
                self.fed[source] = frozenset(resolve_source(self.ctx, source).index_ids)
        return self.fed[source]

    def concerns(self, job: JobRow, *, waiting_vectors: bool) -> bool:
        if not self.ids:
            return False
        targets = self.indexes(job)
        if targets is None:
            return waiting_vectors if job.kind in EMBEDDING_KINDS else True
        return bool(targets & self.ids)


def _building(job: JobRow) -> bool:
    return job.kind != "action" or job.params.get("action") in BUILDING_ACTIONS


def _finished_builds(ctx: Context) -> Iterator[JobRow]:
    for offset in range(0, FINISHED_SCAN, FINISHED_PAGE):
        page = job_rows.finished_page(ctx.catalog.conn, BUILD_KINDS, limit=FINISHED_PAGE, offset=offset)
        yield from page
        if len(page) < FINISHED_PAGE:
            return


def status_of_indexes(ctx: Context, index_ids: Collection[str]) -> dict[str, Any]:
    """``index_status``'s status keys and ``Message``, counted over ``index_ids`` only."""
    conn = ctx.catalog.conn
    ids = frozenset(index_ids)
    ids_by_ref: dict[str, str] = {}
    for row in index_rows.list_all(conn, include_hidden=True):
        ids_by_ref[row.name] = ids_by_ref[row.id] = row.id
    targets = JobTargets(ctx, ids, ids_by_ref)
    waiting = {ident: pending_chunks(ctx, ident, ids) for ident in wanted_identities(ctx)} if ids else {}
    dirty_emb = sum(waiting.values())
    mine = [j for j in job_rows.active(conn) if targets.concerns(j, waiting_vectors=dirty_emb > 0)]
    running = [j for j in mine if j.state == "running"]
    queue_depth = len(mine) - len(running)
    in_flight = running[0] if running else None
    vector_build = next((b for b in running_builds(ctx) if waiting.get(b.identity)), None)
    dirty_paths = changes.dirty_documents_in(conn, ctx.keywords_mark, ids)
    last_build = next((j for j in _finished_builds(ctx) if targets.concerns(j, waiting_vectors=True)), None)
    error = last_build.error if last_build is not None and last_build.state == "failed" else None
    if in_flight is not None and _building(in_flight):
        status = "building"
    elif error is not None:
        status = "failed"
    else:
        status = "queryable"
    if ctx.keywords.damage is not None:  # as index_status: every index's searches fail
        status = "failed"
        error = f"the keyword index is damaged ({ctx.keywords.damage}); run `{REPAIR}` to rebuild it"
    flight = in_flight.kind if in_flight else ("build_embeddings" if vector_build else None)
    caught_up = (
        status == "queryable" and queue_depth == 0 and flight is None and dirty_paths == 0 and dirty_emb == 0
    )
    return {
        "status": status,
        "error": None if status == "building" else error,
        "queue_depth": queue_depth,
        "in_flight": flight,
        "dirty_paths": dirty_paths,
        "dirty_embeddings": dirty_emb,
        "caught_up": caught_up,
        "Message": "caught up"
        if caught_up
        else f"{status}; queue {queue_depth}, in flight {flight or 'nothing'}, dirty paths {dirty_paths},"
        f" dirty embeddings {dirty_emb}",
    }


def embedding_counts(ctx: Context, index_ids: Collection[str]) -> tuple[int, int]:
    """embeddings_status's ``chunk_count`` and ``pending_embeddings`` over ``index_ids`` only: the
    chunks of those with embeddings on, and those still waiting for a vector."""
    conn = ctx.catalog.conn
    ids = frozenset(index_ids)
    if not ids:
        return 0, 0
    chunks = sum(
        index_rows.stats(conn, r.id)["chunk_count"]
        for r in index_rows.list_all(conn)
        if r.embeddings and r.id in ids
    )
    return chunks, sum(pending_chunks(ctx, ident, ids) for ident in wanted_identities(ctx))
