"""What HNSW search depth the searches of this node run at, for ``gitkb status`` (``vectors``).

``[chroma] ef_search`` is a property of a Chroma collection, not of a query (Chroma's ``query`` takes
no depth), so the nodes of a workspace sharing one Chroma server share one value per collection. A
node sets it only when its configured value is new for it (``Context.ef_search_is_new``): the node
that changed its value last (or created the collection) sets it, and nodes never flip it back and
forth. A node whose configuration differs from what a collection records, or whose change Chroma
refused, says so here: ``vectors.ef_search_in_use`` and a warning, not only a log line.
"""

from __future__ import annotations

from typing import Any

from gitkb.core.errors import GitkbError
from gitkb.services.context import Context
from gitkb.services.derived.vector_wants import wanted_identities


def ef_search_view(ctx: Context) -> tuple[dict[str, Any], list[str]]:
    """(``vectors`` of the status: this node's ``ef_search`` and, where they differ, the depth each
    collection searches at; the warnings)."""
    want = ctx.settings.chroma_ef_search
    out: dict[str, Any] = {"ef_search": want}
    if not ctx.settings.chroma_host and ctx.caches.vectors is None:
        return out, []  # embedded, not opened yet: opening it gives every collection this value
    identities = wanted_identities(ctx)
    if not identities:
        return out, []
    try:
        store = ctx.vectors
        found = [f for f in (store.recorded_ef_search(i) for i in identities) if f is not None]
    except GitkbError as exc:
        return out, [f"could not read the vector collections' ef_search: {exc.message}"]
    refused = store.ef_search_refused
    differ = {name: ef for name, ef in found if ef is not None and ef != want}
    warnings = []
    for name, ef in sorted(differ.items()):
        why = refused.get(name) or (
            "on a shared Chroma server a collection keeps the depth set by the node whose [chroma] "
            "ef_search changed last (or that created it); give every node one value"
        )
        warnings.append(
            f"vector collection {name} searches at ef_search {ef}, not this node's [chroma] ef_search "
            f"{want}: {why}"
        )
    if differ:
        out["ef_search_in_use"] = differ
    return out, warnings
