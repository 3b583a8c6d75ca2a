"""Stable identifiers.

* index ids: ``kidx_`` + 32 hex, random at creation, stable across renames;
* document ids: ``doc_`` + 32 hex, fixed when a document is first added and
  kept across renames, syncs and re-chunkings;
* chunk ids: ``kchk_`` + 32 hex = hash(document id, hash of the chunk text,
  occurrence number of that text in the document). Never the path or index name.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable


def new_index_id() -> str:
    return "kidx_" + uuid.uuid4().hex


def new_document_id() -> str:
    return "doc_" + uuid.uuid4().hex


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def bytes_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def chunk_id(document_id: str, text_hash: str, occurrence: int) -> str:
    h = hashlib.sha256(f"{document_id}\x00{text_hash}\x00{occurrence}".encode()).hexdigest()
    return "kchk_" + h[:32]


def chunk_ids_for(document_id: str, text_hashes: Iterable[str]) -> list[str]:
    """Chunk ids for a document's chunks in order; repeated texts get rising occurrence numbers."""
    seen: dict[str, int] = {}
    out = []
    for th in text_hashes:
        n = seen.get(th, 0)
        seen[th] = n + 1
        out.append(chunk_id(document_id, th, n))
    return out
