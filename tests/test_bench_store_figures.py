"""Smoke test of bench/store_figures.py on a tiny corpus: every figure the README quotes from it
is printed (tantivy and FTS5 p50/p95, the rescoring cost per candidate, Chroma HNSW p50/p95).
No timing is asserted: the figures are read on a quiet machine."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("bench_store_figures", REPO / "bench" / "store_figures.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_store_figures_prints_every_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        "\n".join(
            json.dumps({"question": q})
            for q in (
                "how do I promote the database replica",
                "rotate the payments api keys",
                "password length",
            )
        )
    )
    mod = _load()
    docs = REPO / "example_kb_repo" / "docs"
    mod.main(
        [
            "--docs",
            str(docs),
            "--questions",
            str(questions),
            "--chunks",
            "40",
            "--vectors",
            "300",
            "--queries",
            "12",
        ]
    )
    out = capsys.readouterr().out
    assert re.search(r"tantivy \(KeywordIndex.search\): p50 [\d.]+ ms, p95 [\d.]+ ms", out), out
    assert re.search(r"SQLite FTS5 \(bm25\): +p50 [\d.]+ ms, p95 [\d.]+ ms", out), out
    assert re.search(r"BM25 rescoring .* per rescored candidate: p50 [\d.]+ ms", out), out
    assert re.search(r"Chroma HNSW .* 300 vectors .* p50 [\d.]+ ms, p95 [\d.]+ ms", out), out
    assert "load average" in out


def test_pieces_cut_pages_at_paragraph_ends() -> None:
    mod = _load()
    got = mod.pieces(REPO / "example_kb_repo" / "docs", 1000, size=200)
    assert got and all(len(p) >= 1 for p in got)
    assert len(mod.pieces(REPO / "example_kb_repo" / "docs", 3, size=200)) == 3
