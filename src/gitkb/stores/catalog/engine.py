"""What the catalog's table modules need of a database, whichever engine holds it.

``Conn`` is the connection protocol every store function takes: ``execute(sql, params)`` and
``executemany`` with ``?`` placeholders, cursors with ``fetchone``/``fetchall``/iteration, rows
readable by name and by position (``sqlite3.Row``, or ``postgres.PgRow``). ``sqlite3.Connection``
satisfies it as it is (SQLite pays nothing); ``postgres.PgConnection`` adapts a psycopg connection.

The SQL is portable wherever both engines agree (``ON CONFLICT ... DO UPDATE/NOTHING``,
``RETURNING``, ``COALESCE``, ``IS NOT DISTINCT FROM``, ``CASE``, times passed from Python);
``Dialect`` holds the rest, found by ``dialect_of(conn)``.

``CatalogStore`` is what the services hold (``Context.catalog``): ``db.Catalog`` (SQLite) or
``postgres.PgCatalog``; ``open_catalog`` in ``db`` picks one from the catalog URL.

Fencing (``CatalogStore.fenced``, ``FenceSlot``): while a thread holds a fence, every write transaction
it opens runs the fence's check first, inside the transaction and after the write lock is taken
(SQLite's ``BEGIN IMMEDIATE``, PostgreSQL's advisory lock), and rolls back when the check raises. The
writer fences its jobs with its lease token (``stores.node_lease.WriterLease.fence``): a writer whose
lease another node took writes nothing more. Since every write holds the write lock, nobody can take
the lease between the check and the commit.
"""

from __future__ import annotations

import re
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit, urlunsplit


class CursorLike(Protocol):
    """What the store functions read from a cursor."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """A catalog connection: ``sqlite3.Connection`` or ``postgres.PgConnection``."""

    def execute(self, sql: str, parameters: Any = ..., /) -> CursorLike: ...

    def executemany(self, sql: str, parameters: Any, /) -> CursorLike: ...


class CatalogStore(Protocol):
    """The catalog the services hold: a connection for autocommit reads, and transactions."""

    @property
    def backend(self) -> dict[str, Any]:
        """Which engine holds the catalog (``status``, ``/readyz``); never a password."""
        ...

    @property
    def conn(self) -> Conn: ...

    def write(self) -> AbstractContextManager[Conn]: ...

    def read(self) -> AbstractContextManager[Conn]: ...

    def fenced(self, check: Fence | None) -> AbstractContextManager[None]:
        """While it is held, this thread's write transactions run ``check`` first (see ``FenceSlot``)."""
        ...

    def close(self) -> None: ...


Fence = Callable[[Conn], None]  # raises (``core.errors.LeaseLost``) when the transaction must not write


class FenceSlot:
    """Each thread's fence on one catalog: ``hold`` sets it for a block, ``check`` runs it (a write
    transaction calls it right after taking the write lock; nothing when the thread holds none)."""

    def __init__(self) -> None:
        self._local = threading.local()

    @contextmanager
    def hold(self, check: Fence | None) -> Iterator[None]:
        before = getattr(self._local, "check", None)
        self._local.check = check if check is not None else before
        try:
            yield
        finally:
            self._local.check = before

    def check(self, conn: Conn) -> None:
        fence: Fence | None = getattr(self._local, "check", None)
        if fence is not None:
            fence(conn)


@dataclass(frozen=True)
class Dialect:
    """The few things the two engines spell differently."""

    name: str  # "sqlite" | "postgresql"
    strpos: str  # position of the 2nd argument in the 1st, 1-based, 0 when absent
    glob: str  # a case-sensitive shell glob match of a column (``{col}``) against one parameter
    json_ints: str  # a subquery of the integers in a JSON array parameter
    octet_length: str  # bytes of a text column (``{col}``)

    def glob_param(self, pattern: str) -> str:
        """The parameter ``glob`` takes for a shell glob."""
        return pattern if self.name == "sqlite" else glob_to_regex(pattern)


SQLITE = Dialect(
    name="sqlite",
    strpos="instr({a}, {b})",
    glob="{col} GLOB ?",
    json_ints="SELECT value FROM json_each(?)",
    octet_length="LENGTH(CAST({col} AS BLOB))",
)

POSTGRES = Dialect(
    name="postgresql",
    strpos="strpos({a}, {b})",
    glob="{col} ~ ?",
    json_ints="SELECT CAST(value AS BIGINT) FROM json_array_elements_text(CAST(? AS JSON))",
    octet_length="octet_length({col})",
)


class HasDialect(Protocol):
    dialect: Dialect


def dialect_of(conn: Conn) -> Dialect:
    """The dialect of this connection (SQLite's own connection carries none)."""
    if isinstance(conn, sqlite3.Connection):
        return SQLITE
    d = getattr(conn, "dialect", None)
    return d if isinstance(d, Dialect) else SQLITE


def glob_to_regex(pattern: str) -> str:
    """SQLite's GLOB (``*``, ``?``, ``[...]``, ``[^...]``, case-sensitive, whole string) as a POSIX regex."""
    out = ["^"]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            j = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("^", "]") else i + 1)
            if j < 0:
                out.append(r"\[")
            else:
                body = pattern[i + 1 : j].replace("\\", "\\\\")
                out.append("[" + body + "]")
                i = j
        else:
            out.append(re.escape(ch))
        i += 1
    out.append("$")
    return "".join(out)


def redact_url(url: str) -> str:
    """The URL without its password, in the user part or as ``?password=`` (for status and logs)."""
    parts = urlsplit(url)
    query = "&".join(
        f"{k}=***" if k.lower() == "password" else f"{k}={v}" for k, v in parse_qsl(parts.query, True)
    )
    netloc = parts.netloc
    if parts.password is not None:
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{parts.username}:***@{host}" if parts.username else f"***@{host}"
        if parts.port:
            netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def in_marks(values: Sequence[Any]) -> str:
    """``?,?,...`` for an ``IN (...)`` of these values."""
    return ",".join("?" * len(values))


def catalog_errors() -> tuple[type[Exception], ...]:
    """The exceptions a catalog read raises when the database cannot answer: SQLite's, and
    psycopg's once a PostgreSQL catalog loaded it (``except catalog_errors() as exc``)."""
    pg = sys.modules.get("psycopg")
    return (sqlite3.Error,) if pg is None else (sqlite3.Error, pg.Error)
