"""A fresh PostgreSQL database per test, cloned from a migrated template (tens of milliseconds).

``GITKB_TEST_POSTGRES_URL`` names a server (``scripts/test`` starts a throwaway one when it is
unset); it is read when this module is imported, before the autouse fixture clears ``GITKB_*``.
Without it the PostgreSQL half of the both-backend suites is skipped, except under ``CI=true``,
where it fails: CI never skips them.
"""

from __future__ import annotations

import atexit
import itertools
import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

SERVER_URL = os.environ.get("GITKB_TEST_POSTGRES_URL") or None
IN_CI = os.environ.get("CI", "").lower() == "true"
TEMPLATE = f"gitkb_tpl_{os.getpid()}"

_counter = itertools.count()
_template_ready = False


def require_server() -> str:
    """The server URL, or skip (fail under CI) when there is none."""
    if SERVER_URL is None:
        msg = "GITKB_TEST_POSTGRES_URL is not set: run through scripts/test (it starts a PostgreSQL)"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return SERVER_URL


def url_for(database: str) -> str:
    """The server URL with another database name."""
    parts = urlsplit(require_server())
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, parts.fragment))


def _admin() -> Any:
    import psycopg  # heavy: only tests of the PostgreSQL backend connect

    return psycopg.connect(url_for("postgres"), autocommit=True)


def _ensure_template() -> None:
    """Create the migrated template database once per test process."""
    global _template_ready
    if _template_ready:
        return
    from gitkb.stores.catalog.postgres import PgCatalog  # heavy: psycopg

    with _admin() as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {TEMPLATE}")
    PgCatalog(url_for(TEMPLATE), pool_max=1).close()
    _template_ready = True
    atexit.register(drop_database, url_for(TEMPLATE))  # a long-lived server keeps no leftovers


def create_database() -> str:
    """A new database holding the migrated, empty catalog; returns its URL."""
    _ensure_template()
    name = f"gitkb_t_{os.getpid()}_{next(_counter)}"
    with _admin() as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    return url_for(name)


def drop_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    with _admin() as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
