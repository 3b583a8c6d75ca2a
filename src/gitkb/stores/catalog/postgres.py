"""The catalog on PostgreSQL: psycopg 3 over a ``psycopg_pool`` connection pool.

``PgCatalog`` has ``db.Catalog``'s shape (``conn``, ``write()``, ``read()``, ``close()``), and its
connections (``PgConnection``) the ``engine.Conn`` protocol: ``?`` placeholders are translated to
psycopg's ``%s`` (once per statement text, cached), rows read by name and by position (``PgRow``),
``numeric`` (what ``SUM`` of integers gives) comes back as ``int``.

Transactions make the guarantees the SQLite code relies on:

- ``write()`` is SQLite's ``BEGIN IMMEDIATE``: one write transaction at a time over the whole
  catalog, whichever process or node runs it. It is a READ COMMITTED transaction that first takes
  the transaction-level advisory lock ``WRITE_LOCK_KEY`` (``pg_advisory_xact_lock``), so writers
  run one after another and each sees everything committed before it; the lock goes with the
  commit, the rollback, or the session of a node that died.
- ``read()`` is a REPEATABLE READ transaction: one snapshot for several reads, never waiting
  for the writer.
- ``conn`` outside a transaction runs each statement in autocommit on a connection borrowed from
  the pool for that statement (rows are fetched before it goes back), so any thread may use it; a
  statement that writes takes the write lock for itself, as an autocommit write waits for SQLite's.
  Since every write holds the lock, change-log sequence numbers commit in the order they were
  given, so a watermark never passes a number that commits later. A write waits at most
  ``LOCK_TIMEOUT_S`` for the lock (SQLite's busy timeout), then fails.

A write transaction runs the thread's fence (``engine.FenceSlot``) right after taking the lock, an
autocommit write too.

The job queue's claim (``jobs.claim_next``) also says ``FOR UPDATE SKIP LOCKED``, so two claims
outside the write lock never take the same job.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.adapt import Dumper, Loader
from psycopg.rows import RowMaker
from psycopg_pool import ConnectionPool

from gitkb.core.errors import StoreUnavailable
from gitkb.stores.catalog.engine import POSTGRES, CursorLike, Dialect, Fence, FenceSlot, redact_url
from gitkb.stores.catalog.migrations import migrate

WRITE_LOCK_KEY = 0x6769746B62  # "gitkb": the one catalog write lock (pg_advisory_xact_lock)
POOL_MAX = 8
LOCK_TIMEOUT_S = 30  # how long a write waits for the write lock (SQLite's busy timeout)


class PgRow(tuple[Any, ...]):
    """A row readable by position and by column name, like ``sqlite3.Row``."""

    _names: dict[str, int]

    def __new__(cls, values: Sequence[Any], names: dict[str, int]) -> PgRow:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: Any) -> RowMaker[PgRow]:
    desc = cursor.description or []
    names = {c.name: i for i, c in enumerate(desc)}
    return lambda values: PgRow(values, names)


class _NumericLoader(Loader):
    """``numeric`` as ``int`` when whole (``SUM`` of integers), else ``float``, like SQLite."""

    def load(self, data: Any) -> int | float:
        text = bytes(data).decode()
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        return float(text)


class _BoolAsIntDumper(Dumper):
    """``True``/``False`` as the 1/0 the schema's integer flags hold, as SQLite stores them."""

    oid = psycopg.adapters.types["int8"].oid

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """``?`` placeholders outside quotes become ``%s``; a literal ``%`` becomes ``%%``."""
    out: list[str] = []
    quote: str | None = None
    for ch in sql:
        if quote is not None:
            if ch == quote:
                quote = None
            out.append("%%" if ch == "%" else ch)
        elif ch in ("'", '"'):
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)


class _Buffered:
    """The rows of a statement that already ran (its connection went back to the pool)."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class PgConnection:
    """One psycopg connection seen through ``engine.Conn``."""

    dialect: Dialect = POSTGRES

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw
        self.in_transaction = False

    def execute(self, sql: str, parameters: Any = (), /) -> CursorLike:
        cur: CursorLike = self.raw.execute(translate(sql), parameters or None)
        return cur

    def executemany(self, sql: str, parameters: Any, /) -> CursorLike:
        cur = self.raw.cursor()
        cur.executemany(translate(sql), list(parameters))
        out: CursorLike = cur
        return out


class _PooledConn:
    """``PgCatalog.conn`` outside a transaction: each statement on a pooled connection, autocommit."""

    dialect: Dialect = POSTGRES

    def __init__(self, catalog: PgCatalog) -> None:
        self._catalog = catalog

    def execute(self, sql: str, parameters: Any = (), /) -> CursorLike:
        with self._catalog.pool.connection() as raw, _locked_if_writing(raw, sql, self._catalog._fence):
            cur = raw.execute(translate(sql), parameters or None)
            rows = cur.fetchall() if cur.description is not None else []
            return _Buffered(rows, cur.rowcount)

    def executemany(self, sql: str, parameters: Any, /) -> CursorLike:
        with self._catalog.pool.connection() as raw, _locked_if_writing(raw, sql, self._catalog._fence):
            cur = raw.cursor()
            cur.executemany(translate(sql), list(parameters))
            return _Buffered([], cur.rowcount)


_WRITES = re.compile(r"\s*(INSERT|UPDATE|DELETE|REPLACE|CREATE|ALTER|DROP)\b", re.IGNORECASE)


@contextmanager
def _locked_if_writing(raw: psycopg.Connection[Any], sql: str, fence: FenceSlot) -> Iterator[None]:
    """A write outside ``write()`` takes the catalog write lock too (as an autocommit write waits for
    SQLite's): change-log sequence numbers then commit in order, so a watermark never skips one. It
    runs the thread's fence too."""
    if not _WRITES.match(sql):
        yield
        return
    raw.execute("BEGIN")
    try:
        raw.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_S}s'")
        raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
        fence.check(PgConnection(raw))
        yield
    except BaseException:
        with contextlib.suppress(psycopg.Error):
            raw.execute("ROLLBACK")
        raise
    else:
        raw.execute("COMMIT")


def _configure(raw: psycopg.Connection[Any]) -> None:
    raw.autocommit = True
    raw.row_factory = _row_factory
    raw.adapters.register_loader("numeric", _NumericLoader)
    raw.adapters.register_dumper(bool, _BoolAsIntDumper)


class PgCatalog:
    """The catalog in a PostgreSQL database (``postgresql://...``); see the module docstring."""

    def __init__(self, url: str, *, pool_max: int = POOL_MAX) -> None:
        self.url = url
        self._local = threading.local()
        self._write_lock = threading.RLock()
        self._fence = FenceSlot()
        self.pool: ConnectionPool[Any] = ConnectionPool(
            url, min_size=1, max_size=pool_max, configure=_configure, open=False, name="gitkb-catalog"
        )
        try:
            self.pool.open(wait=True, timeout=15)
        except psycopg.Error as exc:
            self.pool.close()
            raise StoreUnavailable(f"cannot open the catalog at {redact_url(url)}: {exc}") from exc
        except Exception as exc:  # psycopg_pool.PoolTimeout: the server did not answer
            self.pool.close()
            raise StoreUnavailable(f"cannot open the catalog at {redact_url(url)}: {exc}") from exc
        self._pooled = _PooledConn(self)
        with self.write() as conn:
            migrate(conn)

    @property
    def backend(self) -> dict[str, Any]:
        return {"engine": "postgresql", "url": redact_url(self.url)}

    @property
    def conn(self) -> Any:
        """This thread's transaction connection when inside ``write()``/``read()``, else autocommit."""
        current: PgConnection | None = getattr(self._local, "tx", None)
        return current if current is not None else self._pooled

    @contextmanager
    def _transaction(self, begin: str, lock: bool) -> Iterator[PgConnection]:
        current: PgConnection | None = getattr(self._local, "tx", None)
        if current is not None:  # nested: join the outer transaction
            if lock and not getattr(self._local, "locked", False):
                current.execute("SELECT pg_advisory_xact_lock(?)", (WRITE_LOCK_KEY,))
                self._local.locked = True
                self._fence.check(current)
            yield current
            return
        with self.pool.connection() as raw:
            conn = PgConnection(raw)
            raw.execute(begin)
            conn.in_transaction = True
            self._local.tx = conn
            self._local.locked = lock
            try:
                if lock:
                    raw.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_S}s'")
                    raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
                    self._fence.check(conn)  # under the write lock: nobody takes the lease before COMMIT
                yield conn
            except BaseException:
                with contextlib.suppress(psycopg.Error):  # a lost connection: the server rolled back
                    raw.execute("ROLLBACK")
                raise
            else:
                raw.execute("COMMIT")
            finally:
                conn.in_transaction = False
                self._local.tx = None
                self._local.locked = False

    @contextmanager
    def write(self) -> Iterator[PgConnection]:
        """One write transaction, serialised over the whole catalog (see the module docstring)."""
        with self._write_lock, self._transaction("BEGIN", lock=True) as conn:
            yield conn

    def fenced(self, check: Fence | None) -> contextlib.AbstractContextManager[None]:
        """This thread's write transactions run ``check`` first while it is held (``engine.FenceSlot``)."""
        return self._fence.hold(check)

    @contextmanager
    def read(self) -> Iterator[PgConnection]:
        """A consistent snapshot for several reads."""
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ", lock=False) as conn:
            yield conn

    def close(self) -> None:
        self.pool.close()
