"""The catalog's connections. SQLite (the default): WAL, foreign keys, one connection per thread,
one in-process write lock, ``BEGIN IMMEDIATE`` write transactions (each runs the thread's fence
first, ``engine.FenceSlot``). ``open_catalog`` picks SQLite
or PostgreSQL (``postgres.PgCatalog``) from the catalog URL the entry point was given."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from gitkb.core.errors import InvalidArgument, StoreUnavailable
from gitkb.core.files import FILE_MODE, create_private
from gitkb.stores.catalog.engine import CatalogStore, Fence, FenceSlot
from gitkb.stores.catalog.migrations import migrate

BUSY_TIMEOUT_MS = 30_000


def tighten(path: Path) -> None:
    """Make the catalog and its -wal/-shm owner-only if they are readable by others."""
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if p.stat().st_mode & 0o077:
                os.chmod(p, FILE_MODE)
        except FileNotFoundError:
            continue


class Catalog:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        # It holds webhook secrets: 0600 from the start. SQLite gives -wal and -shm the mode of
        # the database file, so they are 0600 too.
        with contextlib.suppress(OSError):  # a read-only home: connecting reports it
            create_private(self.path)
            tighten(self.path)  # a catalog made by an older gitkb (0644): owner-only from now on
        self._local = threading.local()
        self._write_lock = threading.RLock()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._fence = FenceSlot()
        with self.write() as conn:
            migrate(conn)

    @property
    def backend(self) -> dict[str, Any]:
        return {"engine": "sqlite", "path": str(self.path)}

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:  # pragma: no cover - depends on the filesystem
            raise StoreUnavailable(f"cannot open the catalog at {self.path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        with self._all_lock:
            self._all.append(conn)
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection (autocommit; use ``write()`` for transactions)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``), serialised inside the process."""
        with self._write_lock:
            conn = self.conn
            if conn.in_transaction:  # nested: join the outer transaction
                yield conn
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._fence.check(conn)  # under the write lock: nobody takes the lease before COMMIT
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")

    def fenced(self, check: Fence | None) -> contextlib.AbstractContextManager[None]:
        """This thread's write transactions run ``check`` first while it is held (``engine.FenceSlot``)."""
        return self._fence.hold(check)

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several reads."""
        conn = self.conn
        if conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def close(self) -> None:
        with self._all_lock:
            conns, self._all = self._all, []
        for c in conns:
            with contextlib.suppress(sqlite3.Error):
                c.close()
        self._local = threading.local()


def sqlite_path(url: str) -> Path:
    """The file of a ``sqlite:////abs/path.sqlite3`` URL (an absolute path: four slashes)."""
    parts = urlsplit(url)
    path = unquote(parts.path)
    if parts.netloc or not path.startswith("//") or path.rstrip("/") == "":
        raise InvalidArgument(
            f"catalog url {url!r}: a SQLite catalog is sqlite:////absolute/path.sqlite3 (four slashes)"
        )
    return Path(path[1:])


def open_catalog(url: str | None, default_path: Path) -> CatalogStore:
    """The catalog at ``url`` (``postgresql://...``, ``sqlite:////abs/path``), or SQLite at
    ``default_path`` when no URL is given."""
    if not url:
        return Catalog(default_path)
    scheme = urlsplit(url).scheme.lower()
    if scheme == "sqlite":
        return Catalog(sqlite_path(url))
    if scheme in ("postgresql", "postgres"):
        from gitkb.stores.catalog.postgres import PgCatalog  # heavy: psycopg, only for a PostgreSQL catalog

        return PgCatalog(url)
    raise InvalidArgument(
        f"catalog url: unknown scheme {scheme!r}; use postgresql://user@host:port/db or sqlite:////abs/path.sqlite3"
    )
