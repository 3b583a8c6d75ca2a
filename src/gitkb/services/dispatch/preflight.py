"""Checks a job's parameters before it is queued, so a refused call leaves no failed job behind.

``jobs.submit`` and ``jobs.run_inline`` call ``check(ctx, kind, params)`` before they insert a
job row. Each check reads only, and raises the same error the job itself would raise first
(the same validators, in ``indexing/admission.py``: ``get_index``, ``chunk_config_for``, ``placement``,
``resolve_document`` ...). What only the run can find out (a file that vanishes between the
check and the run, a vector store that is down) still fails the job.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any

from gitkb.core import disk_roots
from gitkb.core.chunk_config import resolve_config
from gitkb.core.errors import Conflict, InvalidArgument
from gitkb.core.names import validate_index_name, validate_new_filename
from gitkb.services.changes.sources import reach
from gitkb.services.changes.sources.sync import COMMIT_ID
from gitkb.services.context import Context
from gitkb.services.indexing.admission import admit_documents, admit_text
from gitkb.services.indexing.documents import resolve_document
from gitkb.services.indexing.guard import ensure_not_managed
from gitkb.services.indexing.indexes import get_index
from gitkb.services.indexing.reindex import refuse_outside
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import vector_state as vs

Check = Callable[..., object]


def _delete_document(
    ctx: Context, index_name: Any = None, file_id: Any = None, filepath: Any = None, **_: Any
) -> None:
    row = get_index(ctx, index_name)
    ensure_not_managed(ctx, row, "DELETE_DOCUMENT")
    resolve_document(ctx, row, file_id, filepath)


def _rename_document(
    ctx: Context, index_name: Any = None, filepath: Any = None, new_filename: Any = None, **_: Any
) -> None:
    new_name = validate_new_filename(new_filename)
    row = get_index(ctx, index_name)
    ensure_not_managed(ctx, row, "RENAME_DOCUMENT")
    doc = resolve_document(ctx, row, None, filepath)
    folder = posixpath.dirname(doc.path)
    new_path = f"{folder}/{new_name}" if folder else new_name
    if new_path == doc.path:
        raise InvalidArgument(f"{doc.path!r} already has the name {new_name!r}")
    if doc_rows.get_by_path(ctx.catalog.conn, row.id, new_path) is not None:
        raise Conflict(f"cannot rename to {new_path!r}: a document with that path exists in {row.name!r}")


def _create_index(ctx: Context, index_name: Any = None, **_: Any) -> None:
    name = validate_index_name(index_name)
    if index_rows.get_by_name(ctx.catalog.conn, name) is not None:
        raise Conflict(
            f"index {name!r} already exists",
            next_steps=[
                "choose another name, or DELETE_INDEX it first",
                "ADD_DOCUMENTS adds to the existing one",
            ],
        )


def _existing_index(ctx: Context, index_name: Any = None, **_: Any) -> None:
    get_index(ctx, index_name)


def _rename_index(ctx: Context, index_name: Any = None, new_index_name: Any = None, **_: Any) -> None:
    new = validate_index_name(new_index_name, field="new_index_name")
    row = get_index(ctx, index_name)
    if index_rows.get_by_name(ctx.catalog.conn, new) is not None:
        raise Conflict(f"cannot rename {row.name!r} to {new!r}: an index named {new!r} already exists")


def _delete_index(ctx: Context, index_name: Any = None, **_: Any) -> None:
    if isinstance(index_name, str) and any(
        p.index_name == index_name.strip() for p in vs.purges(ctx.catalog.conn)
    ):
        return  # a retry that finishes a failed purge: the job does it
    get_index(ctx, index_name)


def _rechunk(
    ctx: Context,
    index_name: Any = None,
    chunk_size: Any = None,
    chunk_overlap: Any = None,
    chunk_strategy: Any = None,
    **_: Any,
) -> None:
    row = get_index(ctx, index_name)
    for name, v in (("chunk_size", chunk_size), ("chunk_overlap", chunk_overlap)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise InvalidArgument(f"{name} must be an integer, got {v!r}")
    resolve_config(chunk_strategy, chunk_size, chunk_overlap, defaults=row.chunk_defaults)


ACTION_CHECKS: dict[str, Check] = {
    "ADD_DOCUMENTS": admit_documents,  # the service's own checks: one place for each rule
    "ADD_TEXT": admit_text,
    "DELETE_DOCUMENT": _delete_document,
    "RENAME_DOCUMENT": _rename_document,
    "CREATE_INDEX": _create_index,
    "RENAME_INDEX": _rename_index,
    "SET_SEARCH_SETTINGS": _existing_index,
    "DELETE_INDEX": _delete_index,
    "RECHUNK": _rechunk,
}


def check_action(ctx: Context, params: dict[str, Any]) -> None:
    fn = ACTION_CHECKS.get(str(params.get("action")))
    if fn is not None:
        fn(
            ctx,
            **{k: v for k, v in (params.get("params") or {}).items() if v is not None and k != "progress"},
        )


def check_reindex(ctx: Context, params: dict[str, Any]) -> None:
    """An unknown index; held to allowed roots (a remote caller's), a root outside them."""
    refuse_outside(ctx, params.get("index_name") or None, disk_roots.held_roots(params))


def check_reembed(ctx: Context, params: dict[str, Any]) -> None:
    if params.get("index_name") in (None, ""):
        return
    row = get_index(ctx, params["index_name"])
    if not row.embeddings:
        raise InvalidArgument(f"index {row.name!r} is keyword-only (created with embeddings=False)")


def check_sync(ctx: Context, params: dict[str, Any]) -> None:
    """A sync (or rollback) of an unknown source, or to something that is not a commit id, is refused
    before a job row exists; whether the commit is on the tracked branch needs a fetch, in the job.
    Held to allowed roots (a remote caller's): a local-path source outside them is refused too."""
    reach.refuse_outside(ctx, params.get("source"), disk_roots.held_roots(params))
    commit = params.get("commit")
    if commit not in (None, "") and (not isinstance(commit, str) or not COMMIT_ID.fullmatch(commit)):
        raise InvalidArgument(
            f"commit must be a commit id (7 to 64 hex digits) of the tracked branch, got {str(commit)[:80]!r}",
            next_steps=["give a commit of the tracked branch as the remote has it, or no commit"],
        )
