"""Shared fixtures: an isolated workspace per test, real SQLite and tantivy on disk."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.fixture
def ws(home: Path) -> Iterator[object]:
    """A workspace with the fast deterministic embedder (real model tests opt in)."""
    from gitkb import Workspace

    w = Workspace(home, embedding_provider="hashing", embedding_model="hashing-384")
    try:
        yield w
    finally:
        w.close()


@pytest.fixture
def kb_copy(tmp_path: Path) -> Path:
    """A private copy of example_kb_repo/ (not a git repo)."""
    dst = tmp_path / "kb"
    shutil.copytree(EXAMPLE_KB, dst)
    return dst
