"""Shared fixtures: an isolated workspace per test, real SQLite and tantivy on disk.

Workspaces: ``ws`` (one, hashing embedder), ``make_ws`` (a factory of them). HTTP: ``client``
(the app over a fresh workspace through the ASGI TestClient), ``make_client`` (a factory, for a
gitkb.toml or another peer). Git: ``git_env``, ``upstream`` (example_kb_repo/ pushed to a bare
remote), ``source_ws`` (``ws`` with it synced as source ``handbook``). Plain helpers, imported
from the ``helpers`` package: ``wait_until``, ``ok``/``fails``, ``error_code``/``error_message``,
``git``/``Upstream``/``SOURCE``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import postgres
from helpers.sources import SOURCE, Upstream, git

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_KB = REPO / "example_kb_repo"
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the developer's workspace, config or git identity."""
    for k in list(os.environ):
        if k.startswith("GITKB_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("GITKB_ALLOWED_HOSTS", "testserver")  # the ASGI test client's Host header
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "gitkb test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@gitkb.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "gitkb test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@gitkb.invalid")
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "ws"


# The suites that run against both catalog backends (SQLite and PostgreSQL): every test in them
# that uses a workspace (``ws``, ``make_ws``, ``client``, ``make_client``, ``catalog_url``) runs
# twice, ``[sqlite]`` and ``[postgresql]``.
BOTH_BACKENDS = {
    "test_backup.py",  # pgbackup19: the table-rows export of a PostgreSQL catalog, restored
    "test_catalog_backends.py",
    "test_cite_stale.py",  # the retired-chunk triggers (PL/pgSQL on PostgreSQL)
    "test_crash_safety.py",
    "test_document_index.py",
    "test_embeddings_service.py",  # the catalog through helpers.catalog (fence18)
    "test_gate_inbound.py",  # fence18
    "test_http_reviews.py",
    "test_http_webhooks.py",  # fence18
    "test_jobs.py",
    "test_jobs23_retention.py",  # the finished-job prune and its index (m028_jobs23_finished_index)
    "test_knowledge.py",
    "test_mcp_e2e.py",  # the stdio child is given the catalog URL (fence18)
    "test_nodes.py",  # nodes sharing one catalog (nodes18)
    "test_nodes_compaction.py",  # an identity no index uses stops holding compaction back (fence18)
    "test_nodes_fencing.py",  # a writer that lost its lease writes nothing more (fence18)
    "test_nodes_proposals.py",
    "test_nodes_serve.py",  # three API servers on one catalog
    "test_nodes_sync.py",  # three API servers, kill -9 of the writer mid-sync (sync18)
    "test_proposal_refresh.py",
    "test_proposals.py",
    "test_rechunk.py",  # fence18
    "test_review.py",
    "test_review_crash.py",
    "test_sources.py",
}


# GITKB_TEST_EVERY_SUITE_ON_POSTGRES=1: every module that uses a workspace runs on both (to find
# what does not work on PostgreSQL yet).
EVERY_SUITE = os.environ.get("GITKB_TEST_EVERY_SUITE_ON_POSTGRES") == "1"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    both = EVERY_SUITE or Path(str(metafunc.module.__file__)).name in BOTH_BACKENDS
    if "catalog_backend" in metafunc.fixturenames and both:
        metafunc.parametrize("catalog_backend", ["sqlite", "postgresql"], indirect=True)


@pytest.fixture
def catalog_backend(request: pytest.FixtureRequest) -> str:
    """``sqlite`` (the default) or ``postgresql`` (the suites in ``BOTH_BACKENDS``)."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def catalog_for(
    catalog_backend: str, home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[Path], str | None]]:
    """The catalog URL of the workspace at a home: None on SQLite (``<home>/catalog.sqlite3``); on
    PostgreSQL a fresh database per home (``home``'s is also ``GITKB_CATALOG_URL``, so a ``gitkb``
    subprocess the test starts opens the same catalog). Databases are dropped at teardown."""
    made: dict[Path, str] = {}

    def url(at: Path) -> str | None:
        if catalog_backend != "postgresql":
            return None
        at = Path(at).absolute()
        if at not in made:
            made[at] = postgres.create_database()
        return made[at]

    if catalog_backend == "postgresql":
        monkeypatch.setenv("GITKB_CATALOG_URL", str(url(home)))
    yield url
    for u in made.values():
        with contextlib.suppress(Exception):
            postgres.drop_database(u)


@pytest.fixture
def catalog_url(catalog_for: Callable[[Path], str | None], home: Path) -> str | None:
    """The catalog URL of the workspace at ``home`` (None: SQLite)."""
    return catalog_for(home)


@pytest.fixture
def make_ws(home: Path, catalog_for: Callable[[Path], str | None]) -> Iterator[Callable[..., Any]]:
    """A factory of workspaces (at ``home`` unless given another) with the fast deterministic
    embedder; keyword arguments go to ``Workspace`` and override those defaults. All are closed
    at teardown. In a both-backend suite each home's catalog is on the test's backend."""
    from gitkb import Workspace

    opened: list[Any] = []

    def make(at: Path | None = None, **kw: Any) -> Any:
        kw.setdefault("embedding_provider", "hashing")
        kw.setdefault("embedding_model", "hashing-384")
        kw.setdefault("catalog_url", catalog_for(at or home))
        w = Workspace(at or home, **kw)
        opened.append(w)
        return w

    yield make
    for w in reversed(opened):
        w.close()


@pytest.fixture
def ws(make_ws: Callable[..., Any]) -> Any:
    """A workspace with the fast deterministic embedder (real model tests opt in)."""
    return make_ws()


LOCAL_PEER = ("127.0.0.1", 50000)


@pytest.fixture
def make_client(home: Path, catalog_for: Callable[[Path], str | None]) -> Iterator[Callable[..., Any]]:
    """A factory of HTTP clients: the app over the workspace at ``home`` (or ``at``), hashing
    embedder, through the ASGI TestClient, started now and closed at teardown. ``toml`` is
    written to gitkb.toml first; ``peer`` is the client address the app sees."""
    from fastapi.testclient import TestClient

    from gitkb.core.config import load_settings
    from gitkb.http import create_app

    with contextlib.ExitStack() as stack:

        def make(
            toml: str | None = None,
            *,
            at: Path | None = None,
            peer: tuple[str, int] = LOCAL_PEER,
            raise_server_exceptions: bool = True,
        ) -> Any:
            where = at or home
            where.mkdir(parents=True, exist_ok=True)
            if toml is not None:
                (where / "gitkb.toml").write_text(toml)
            settings = load_settings(
                where,
                embedding_provider="hashing",
                embedding_model="hashing-384",
                catalog_url=catalog_for(where),
            )
            app = create_app(settings)
            return stack.enter_context(
                TestClient(app, client=peer, raise_server_exceptions=raise_server_exceptions)
            )

        yield make


@pytest.fixture
def client(make_client: Callable[..., Any]) -> Any:
    """The HTTP app over a fresh workspace (no gitkb.toml), seen from a local peer."""
    return make_client()


@pytest.fixture
def kb_copy(tmp_path: Path) -> Path:
    """A private copy of example_kb_repo/ (not a git repo)."""
    dst = tmp_path / "kb"
    shutil.copytree(EXAMPLE_KB, dst)
    return dst


@pytest.fixture
def git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "userhome"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GITKB_WRITER_TOKEN"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def upstream(git_env: None, kb_copy: Path, tmp_path: Path) -> Upstream:
    """example_kb_repo/ committed and pushed to a bare repository (the forge side)."""
    git(kb_copy, "init", "-q", "-b", "main")
    git(kb_copy, "add", "-A")
    git(kb_copy, "commit", "-q", "-m", "initial handbook")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(kb_copy), str(remote))
    git(kb_copy, "remote", "add", "origin", str(remote))
    git(kb_copy, "fetch", "-q", "origin")
    git(kb_copy, "branch", "-q", "--set-upstream-to=origin/main", "main")
    return Upstream(kb_copy, remote)


@pytest.fixture
def source_ws(ws: Any, upstream: Upstream) -> Iterator[Any]:
    """``ws`` with the example handbook registered as source ``handbook`` and synced."""
    added = ws.source_add(SOURCE, str(upstream.remote))
    assert added["Success"], added
    synced = ws.source_sync(SOURCE)
    assert synced["Success"], synced
    yield ws
