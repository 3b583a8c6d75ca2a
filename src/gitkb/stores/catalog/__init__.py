"""The catalog: SQLite (WAL) holding the truth — indexes, documents, chunks,
the append-only change log, and later jobs, sources, proposals, reviews, audit.

``Catalog`` owns connections (one per thread), the write lock and migrations.
Table-specific queries live in sibling modules as plain functions taking a
``sqlite3.Connection``.
"""

from gitkb.stores.catalog.db import Catalog

__all__ = ["Catalog"]
