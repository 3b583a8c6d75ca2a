"""The catalog (SQLite by default, or PostgreSQL) holding the truth — indexes, documents, chunks,
the append-only change log, and later jobs, sources, proposals, reviews, audit.

``Catalog`` (SQLite) and ``postgres.PgCatalog`` own connections, the write lock and migrations;
``open_catalog`` picks one.
Table-specific queries live in sibling modules as plain functions taking a
``engine.Conn``.
"""

from gitkb.stores.catalog.db import Catalog, open_catalog
from gitkb.stores.catalog.engine import CatalogStore, Conn

__all__ = ["Catalog", "CatalogStore", "Conn", "open_catalog"]
