"""Documents and their chunks in the catalog, one module per idea:

- ``rows``: the row dataclasses, their columns, reads of one document;
- ``write``: the one write path that keeps chunk ids stable (upsert, delete, rename, RECHUNK's swap);
- ``overrides``: what a user deleted or renamed through gitkb (reindex keeps it);
- ``listing``: filtered pages of documents and their chunks;
- ``chunk_reads``: chunks by cid (hits, keyword apply, verify);
- ``counts``: totals, TTL expiry, tenants.

Callers use ``documents.<name>``; the names below are the public surface.
"""

from gitkb.stores.catalog.documents.chunk_reads import (
    CitedChunk,
    LiveChunk,
    all_chunk_cids,
    chunk_cids_by_id,
    chunk_count_of_index,
    chunk_counts_by_index,
    chunk_index_ids,
    chunks_by_cids,
    cited_chunks,
    has_chunks,
    keyword_keys,
    keyword_rows,
    live_chunks,
)
from gitkb.stores.catalog.documents.counts import (
    LIVE,
    count_all,
    count_expired,
    count_in,
    expired_batch,
    has_live_tenant,
    tenant_counts,
    untenanted_counts,
)
from gitkb.stores.catalog.documents.listing import (
    chunk_count_of,
    chunk_counts,
    chunk_outline,
    chunks_of,
    count,
    document_rowids_of_chunks,
    file_documents,
    page,
    rowids_of_index,
    with_text,
)
from gitkb.stores.catalog.documents.overrides import (
    clear_overrides,
    overrides,
    set_override,
)
from gitkb.stores.catalog.documents.rows import (
    CHUNK_COLUMNS,
    DOC_COLUMNS,
    ChunkRow,
    DocumentRow,
    NewDocument,
    chunk_from_row,
    config_key,
    doc_from_row,
    get_by_id,
    get_by_path,
    get_text,
    hashes_by_path,
    state_key,
)
from gitkb.stores.catalog.documents.write import (
    bulk_cache,
    delete,
    rename,
    replace_chunks,
    set_mtime,
    swap_index,
    upsert,
    write_document,
)

__all__ = [
    "CHUNK_COLUMNS",
    "ChunkRow",
    "CitedChunk",
    "DOC_COLUMNS",
    "DocumentRow",
    "LIVE",
    "LiveChunk",
    "NewDocument",
    "all_chunk_cids",
    "bulk_cache",
    "chunk_cids_by_id",
    "chunk_count_of",
    "chunk_count_of_index",
    "chunk_counts",
    "chunk_counts_by_index",
    "chunk_from_row",
    "chunk_index_ids",
    "chunk_outline",
    "chunks_by_cids",
    "chunks_of",
    "cited_chunks",
    "clear_overrides",
    "config_key",
    "count",
    "count_all",
    "count_expired",
    "count_in",
    "delete",
    "doc_from_row",
    "document_rowids_of_chunks",
    "expired_batch",
    "file_documents",
    "get_by_id",
    "get_by_path",
    "get_text",
    "has_chunks",
    "has_live_tenant",
    "hashes_by_path",
    "keyword_keys",
    "keyword_rows",
    "live_chunks",
    "overrides",
    "page",
    "rename",
    "replace_chunks",
    "rowids_of_index",
    "set_mtime",
    "set_override",
    "state_key",
    "swap_index",
    "tenant_counts",
    "untenanted_counts",
    "upsert",
    "with_text",
    "write_document",
]
