"""``cite_check``: is a citation from a git source still true?

A citation names a chunk; its document came from ``<path>`` at ``<commit>``
(the ``source_uri`` ``git+<remote>@<commit>:<path>``). The check re-reads
the file at that commit and compares the cited characters with the chunk's
text, then looks at the branch head (fetched now; the last fetched head if
the remote cannot be reached) and says whether the text is still there:

* ``current`` -- at the head, at the same lines;
* ``moved``   -- at the head, at other lines;
* ``changed`` -- the file exists at the head, the text does not;
* ``deleted`` -- the file is gone at the head;
* ``not_at_commit`` -- the cited commit does not hold the text (rewritten history);
* ``stale`` -- the chunk id left the index (its text changed and was indexed again): its last
  ``source_uri`` and lines are kept (``retired_chunks``); the answer says what those lines say at
  the branch head now (``head_text``; ``passage``: ``changed``, ``moved``, ``passage_gone`` or
  ``file_gone``) and ``current_chunk_id``, the chunk that holds them now, if any. Retired chunks are
  kept ``[catalog] retired_days``: an id whose record the writer pruned answers ``not_found``
  saying it is no longer known (``retired_pruned_before``, ``retired_days``), never "never indexed".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gitkb.core.errors import GitkbError, InvalidArgument, NotFound
from gitkb.services.changes.sources.registry import open_repo, require_fed
from gitkb.services.context import Context
from gitkb.stores.catalog import retired as retired_rows
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.documents import chunk_cids_by_id, chunks_by_cids
from gitkb.stores.catalog.retired import RetiredChunk, chunk_covering, get_retired
from gitkb.stores.catalog.sources import SourceRow
from gitkb.stores.repos import ManagedRepo


def _locate(text: str, needle: str, hint_char: int) -> tuple[int, int] | None:
    """(line_start, line_end) of the occurrence of ``needle`` nearest ``hint_char``."""
    if not needle:
        return None
    best, pos = -1, text.find(needle)
    while pos != -1:
        if best == -1 or abs(pos - hint_char) < abs(best - hint_char):
            best = pos
        pos = text.find(needle, pos + 1)
    if best == -1:
        return None
    start = text.count("\n", 0, best) + 1
    return start, start + needle.rstrip("\r\n").count("\n")


def _read(repo: ManagedRepo, commit: str, path: str) -> str | None:
    try:
        return repo.read_blob(commit, path).decode("utf-8-sig", "replace")
    except NotFound:
        return None


# An agent's warning when the remote is away: git's own words name where the server keeps it.
AGENT_FETCH_WARNING = "could not fetch the branch from the source's remote; checked the last fetched head"


def cite_check(
    ctx: Context, chunk_id: Any, *, may_read: Callable[[str], bool] | None = None
) -> dict[str, Any]:
    """``may_read``: whether the caller may read an index (by id); a chunk of one it may not reads
    as an unknown chunk id, before anything about it is looked at (its source, its remote). A
    scoped caller (``may_read`` given) is told a failed fetch in a fixed sentence."""
    out = _checked(ctx, chunk_id, may_read)
    if may_read is not None and out.get("Warnings"):
        out["Warnings"] = [AGENT_FETCH_WARNING]
    return out


def _checked(ctx: Context, chunk_id: Any, may_read: Callable[[str], bool] | None) -> dict[str, Any]:
    if not isinstance(chunk_id, str) or not chunk_id.strip().startswith("kchk_"):
        raise InvalidArgument("chunk_id must be a chunk id from a search result (kchk_...)")
    conn = ctx.catalog.conn
    cids = chunk_cids_by_id(conn, chunk_id.strip())
    hits = chunks_by_cids(conn, cids)
    if not hits:
        retired = get_retired(conn, chunk_id.strip())
        if retired is None or (may_read is not None and not may_read(retired.index_id)):
            raise _unknown(ctx, chunk_id.strip())
        return _stale(ctx, retired, scoped=may_read is not None)
    hits = {k: v for k, v in hits.items() if may_read is None or may_read(v[1].index_id)}
    if not hits:
        raise _unknown(ctx, chunk_id.strip())
    chunk, doc = next(iter(hits.values()))
    meta = doc.metadata.get("gitkb_source") if isinstance(doc.metadata, dict) else None
    if doc.origin != "git" or not isinstance(meta, dict):
        raise InvalidArgument(
            f"chunk {chunk_id} comes from {doc.source_uri}, not from a git source; nothing to check"
        )
    row = source_rows.get_by_name(conn, str(meta.get("source")))
    if row is None:
        raise NotFound(f"the source {meta.get('source')!r} of chunk {chunk_id} is no longer registered")
    commit = str(meta["commit"])
    repo = open_repo(ctx, row)
    head, warnings = _head(repo, row.branch, commit)
    out: dict[str, Any] = {
        "chunk_id": chunk.id,
        "index_id": doc.index_id,
        "source": row.name,
        "source_uri": doc.source_uri,
        "branch": row.branch,
        "commit": commit,
        "path": doc.path,
        "line_start": chunk.line_start,
        "line_end": chunk.line_end,
        "snippet": chunk.text[:300],
        "head_commit": head,
    }
    try:
        then = _read(repo, commit, doc.path)
    except NotFound:
        then = None
    out["present_at_commit"] = then is not None and then[chunk.char_start : chunk.char_end] == chunk.text
    now = _read(repo, head, doc.path)
    where = _locate(now, chunk.text, chunk.char_start) if now is not None else None
    out["current_at_head"] = where is not None
    if where is not None:
        out["head_line_start"], out["head_line_end"] = where
    if not out["present_at_commit"]:
        status = "not_at_commit"
    elif now is None:
        status = "deleted"
    elif where is None:
        status = "changed"
    elif where == (chunk.line_start, chunk.line_end):
        status = "current"
    else:
        status = "moved"
    out["status"] = status
    out["Message"] = {
        "current": f"{doc.path} lines {chunk.line_start}-{chunk.line_end} still say this at {head[:12]}",
        "moved": f"the text is still in {doc.path} at {head[:12]}, now at lines {out.get('head_line_start')}-"
        f"{out.get('head_line_end')}",
        "changed": f"{doc.path} no longer contains this text at {head[:12]}",
        "deleted": f"{doc.path} no longer exists at {head[:12]}",
        "not_at_commit": f"commit {commit[:12]} does not hold this text at {doc.path}",
    }[status]
    if warnings:
        out["Warnings"] = warnings
    return out


def _unknown(ctx: Context, chunk_id: str) -> NotFound:
    """A chunk id neither in an index nor retired: never indexed, or (once the writer pruned retired
    rows) retired before the retention and no longer known."""
    stats = retired_rows.stats(ctx.catalog.conn)
    pruned = stats.pruned_before
    if pruned is None:
        return NotFound(f"no chunk {chunk_id!r}: it was never indexed here")
    days = stats.pruned_days or ctx.settings.catalog_retired_days  # the prune's (a shared catalog's writer's)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(pruned))
    return NotFound(
        f"chunk {chunk_id!r} is no longer known here: it was never indexed here, or it left the index"
        f" before {when} and its record was pruned (retired chunks are kept {days:g} days,"
        " [catalog] retired_days); search_index again for the passage",
        details={"retired_pruned_before": pruned, "retired_days": days},
    )


def _head(repo: ManagedRepo, branch: str, fallback: str) -> tuple[str, list[str]]:
    """The branch head fetched now; the last fetched head (with a warning) when the remote is away."""
    try:
        return repo.fetch(branch), []
    except GitkbError as exc:
        head = repo.tracking_head(branch) or fallback
        return head, [
            f"could not fetch {branch!r} ({exc.message}); checked the last fetched head {head[:12]}"
        ]


def _stale(ctx: Context, r: RetiredChunk, *, scoped: bool = False) -> dict[str, Any]:
    """A chunk id no longer in the index: what its cited lines say at the branch head now, and the
    chunk that covers them now (``current_chunk_id``, None when none does)."""
    meta = r.metadata.get("gitkb_source")
    out: dict[str, Any] = {
        "chunk_id": r.chunk_id,
        "index_id": r.index_id,
        "status": "stale",
        "source_uri": r.source_uri,
        "path": r.path,
        "line_start": r.line_start,
        "line_end": r.line_end,
        "snippet": r.text[:300],
        "retired_at": r.retired_at,
        "current_at_head": False,
        "current_chunk_id": None,
    }
    conn = ctx.catalog.conn
    covering = chunk_covering(conn, r.index_id, r.path, r.line_start, r.line_end)
    if r.origin != "git" or not isinstance(meta, dict):
        out["passage"] = "changed" if covering else "gone"
        out["current_chunk_id"] = covering.id if covering else None
        out["Message"] = (
            f"chunk {r.chunk_id} is no longer in the index: {r.path} changed since it was cited"
            + (f"; lines {r.line_start}-{r.line_end} are now in chunk {covering.id}" if covering else "")
        )
        return out
    row = source_rows.get_by_name(conn, str(meta.get("source")))
    if row is None:
        raise NotFound(f"the source {meta.get('source')!r} of chunk {r.chunk_id} is no longer registered")
    repo = open_repo(ctx, row)
    commit = str(meta.get("commit") or "")
    head, warnings = _head(repo, row.branch, commit)
    out.update(source=row.name, branch=row.branch, commit=commit, head_commit=head)
    if warnings:
        out["Warnings"] = warnings
    if scoped and not _still_fed(row, repo, head, r.path):  # no file its source stopped feeding
        return _not_fed(out, r, row)
    try:
        now = _read(repo, head, r.path)
    except (NotFound, InvalidArgument):
        now = None
    if now is None:
        out["passage"] = "file_gone"
        out["Message"] = (
            f"chunk {r.chunk_id} is stale: {r.path} no longer exists at {head[:12]}"
            " (search_index again for where the topic went)"
        )
        return out
    lines = now.splitlines()
    where = _locate(now, r.text, r.char_start)
    if where is not None:  # the same text, elsewhere (or re-cut into other chunks)
        out["current_at_head"] = True
        out["head_line_start"], out["head_line_end"] = where
    start, end = where or (r.line_start, min(r.line_end, len(lines)))
    if r.line_start > len(lines) and where is None:
        out["passage"] = "passage_gone"
        out["head_text"] = ""
    else:
        out["passage"] = "moved" if where is not None else "changed"
        out["head_text"] = "\n".join(lines[start - 1 : end])
    covering = chunk_covering(conn, r.index_id, r.path, start, max(start, end))
    if covering is not None:
        out["current_chunk_id"] = covering.id
        out["current_chunk_lines"] = [covering.line_start, covering.line_end]
    said = {
        "moved": f"the cited text is still in {r.path} at {head[:12]}, at lines {start}-{end}",
        "changed": f"{r.path} lines {r.line_start}-{r.line_end} say something else at {head[:12]} (head_text)",
        "passage_gone": f"{r.path} at {head[:12]} is shorter than line {r.line_start}: the passage is gone",
    }[out["passage"]]
    out["Message"] = f"chunk {r.chunk_id} is stale: {said}" + (
        f"; chunk {covering.id} holds those lines now" if covering is not None else ""
    )
    return out


def _still_fed(row: SourceRow, repo: ManagedRepo, head: str, path: str) -> bool:
    """Whether the source feeds ``path`` to its indexes now: by its selection at the synced commit
    (the rule proposals follow, ``registry.require_fed``) and at the head read from the remote (a
    sidecar's exclude pushed there, not synced yet)."""
    try:
        require_fed(row, repo, head, path)  # at the synced commit and at head
    except InvalidArgument:
        return False
    return True


def _not_fed(out: dict[str, Any], r: RetiredChunk, row: SourceRow) -> dict[str, Any]:
    """A scoped caller's answer for a passage whose file the source no longer feeds: no text."""
    out["passage"] = "not_fed"
    out["Message"] = (
        f"chunk {r.chunk_id} is stale: source {row.name!r} no longer feeds {r.path} to its indexes"
        " (search_index again for where the topic went)"
    )
    return out
