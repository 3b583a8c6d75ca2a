"""Smoke test of bench/scale.py on tiny corpora (hashing embedder): every figure is printed, the
synthetic sizes are reached by repeating the corpora, and repeated texts reuse stored vectors."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _load_bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_scale", REPO / "bench" / "scale.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tiny_data(root: Path) -> tuple[Path, Path]:
    aws = root / "awsdocs"
    for i in range(6):
        page = aws / "docs" / f"svc{i % 2}" / f"page{i}.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        body = "\n\n".join(
            f"Paragraph {j} about bucket policy {i} and instance type m{i}.large." for j in range(3)
        )
        page.write_text(
            f"# Page {i}\n\n{body}\n\n## Limits\n\nQuota {i} applies per region.\n", encoding="utf-8"
        )
    (aws / "questions.dev.jsonl").write_text(
        "\n".join(
            json.dumps(
                {
                    "question": f"What quota applies to page {i}?",
                    "doc": f"svc{i % 2}/page{i}.md",
                    "answer": "x",
                }
            )
            for i in range(3)
        ),
        encoding="utf-8",
    )
    sci = root / "scifact"
    (sci / "qrels").mkdir(parents=True)
    (sci / "corpus.jsonl").write_text(
        "\n".join(
            json.dumps({"_id": str(i), "title": f"Study {i}", "text": f"Protein {i} binds receptor {i}."})
            for i in range(8)
        ),
        encoding="utf-8",
    )
    (sci / "queries.train.jsonl").write_text(
        "\n".join(json.dumps({"_id": f"q{i}", "text": f"Does protein {i} bind?"}) for i in range(3)),
        encoding="utf-8",
    )
    (sci / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\t{i}\t1\n" for i in range(3))
    )
    return aws, sci


def test_scale_bench_prints_every_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITKB_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("GITKB_EMBEDDING_MODEL", "bench-h")
    aws, sci = _tiny_data(tmp_path)
    bench = _load_bench()
    report = bench.main(
        [
            "--home",
            str(tmp_path / "home"),
            "--awsdocs",
            str(aws),
            "--scifact",
            str(sci),
            "--sizes",
            "20,60",
            "--queries",
            "6",
            "--ask",
            "2",
            "--embed-sample",
            "5",
        ]
    )
    out = capsys.readouterr().out
    assert "| corpus |" in out and "| chunks |" in out
    for name in ("awsdocs", "scifact"):
        row = report["corpora"][name]
        assert row["documents"] == (6 if name == "awsdocs" else 8) and row["chunks"] >= row["documents"]
        assert row["keyword_chunks_per_s"] > 0 and row["vectors_chunks_per_s"] > 0
        for mode in ("keyword", "semantic", "hybrid"):
            assert row[f"{mode}_p50_ms"] > 0 and row[f"{mode}_p95_ms"] >= row[f"{mode}_p50_ms"]
        assert row["ask_p50_ms"] > 0 and row["peak_rss_mib"] > 0 and row["full_embedded"] == row["chunks"]
    sizes = report["scale"]
    assert [r["chunks"] >= want for r, want in zip(sizes, (20, 60), strict=True)] == [True, True]
    # Repeated texts reuse the corpus workspaces' vectors: the scale index embeds nothing itself.
    assert (
        all(r["embedded"] == 0 for r in sizes)
        and sum(r["vectors_copied"] for r in sizes) == sizes[-1]["chunks"]
    )
