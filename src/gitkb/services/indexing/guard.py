"""The guard on indexes fed by git sources.

An index fed by a source mirrors a git branch; its documents change only
when the branch does (sync). Direct writes -- ADD_DOCUMENTS, ADD_TEXT,
DELETE_DOCUMENT, RENAME_DOCUMENT -- would be overwritten by the next sync
or, worse, silently diverge from git, so the document services call
:func:`ensure_not_managed` first and get ``ManagedRepoGuard`` (code
``managed_repo_guard``, ``managed_document_repo: true``, next steps naming
propose_kb_edit and open_kb_pull_request). The sync and proposal code write
through their own paths and never call this.
"""

from __future__ import annotations

from gitkb.core.errors import ManagedRepoGuard
from gitkb.services.context import Context
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.indexes import IndexRow


def ensure_not_managed(ctx: Context, index_row: IndexRow, action: str = "this write") -> None:
    """Raise ``ManagedRepoGuard`` when ``index_row`` is fed by a git source."""
    fed = source_rows.sources_for_index(ctx.catalog.conn, index_row.id)
    if not fed:
        return
    names = [s.name for s in fed]
    raise ManagedRepoGuard(
        f"index {index_row.name!r} is fed by the git source {', '.join(names)}; {action} would bypass review. "
        "Change the documents in git instead: propose_kb_edit (or propose_kb_delete / propose_kb_rename), "
        "then open_kb_pull_request",
        next_steps=[
            f"propose_kb_edit({names[0]!r}, '<path under the documents root>', search=..., replace=...)",
            f"open_kb_pull_request({names[0]!r}) to send the staged changes for review",
        ],
        details={"index_name": index_row.name, "sources": names},
    )
