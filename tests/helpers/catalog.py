"""The catalog of a test's workspace through the store, on whichever engine the test runs
(``tests/conftest.py`` BOTH_BACKENDS): SQLite at ``<home>/catalog.sqlite3``, or the PostgreSQL database
the ``catalog_for`` fixture made for the test's ``home`` (its URL is ``GITKB_CATALOG_URL`` then).

``rows(home, sql, *args)`` runs one statement (``?`` placeholders, SQL both engines read) and returns
plain tuples; ``execute`` runs a write in one transaction; ``snapshot`` is every table's rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gitkb.stores.catalog import CatalogStore, open_catalog


def url_for(home: Path) -> str | None:
    """The catalog URL of the workspace at ``home``: the test's PostgreSQL database, or None (SQLite)."""
    return os.environ.get("GITKB_CATALOG_URL") or None


@contextmanager
def opened(home: Path) -> Iterator[CatalogStore]:
    store = open_catalog(url_for(home), Path(home) / "catalog.sqlite3")
    try:
        yield store
    finally:
        store.close()


def rows(home: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with opened(home) as store, store.read() as conn:
        return [tuple(r) for r in conn.execute(sql, args).fetchall()]


def execute(home: Path, sql: str, *args: Any) -> int:
    """A write in one transaction; the rows it changed."""
    with opened(home) as store, store.write() as conn:
        return int(conn.execute(sql, args).rowcount)


def snapshot(home: Path, *, leave_out: Iterable[str] = ()) -> dict[str, list[tuple[Any, ...]]]:
    """Every catalog table's rows (sorted), but those in ``leave_out``."""
    from gitkb.stores.catalog.table_rows import table_order  # the tables the migrations make

    skip = set(leave_out)
    with opened(home) as store, store.read() as conn:
        return {
            t: sorted((tuple(r) for r in conn.execute(f'SELECT * FROM "{t}"').fetchall()), key=repr)
            for t in table_order()
            if t not in skip
        }
