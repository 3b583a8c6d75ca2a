"""Smoke test of bench/fusion_variants.py on a tiny BEIR folder (hashing embedder): it builds the
index once, prints every fusion row of the README's "What was tried" table, and its
``score fusion w=0.4`` row is SEARCH's own hybrid ranking (the default) on the same lists."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path
from typing import Any

import pytest

from gitkb import Workspace
from gitkb.services.evaluation import datasets

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _load() -> Any:
    spec = importlib.util.spec_from_file_location(
        "bench_fusion_variants", REPO / "bench" / "fusion_variants.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _beir(root: Path) -> Path:
    """40 documents of random words from a small vocabulary, 12 queries of 4 of them, each judged
    relevant to two random documents sharing a word with it: rankings differ by fusion rule."""
    rnd = random.Random(5)
    vocab = [f"w{i}" for i in range(60)]
    docs = [" ".join(rnd.choices(vocab, k=rnd.randint(6, 30))) for _ in range(40)]
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        "\n".join(json.dumps({"_id": str(i), "title": d.split()[0], "text": d}) for i, d in enumerate(docs))
    )
    queries, qrels = [], []
    for q in range(12):
        words = rnd.sample(vocab, 4)
        queries.append(json.dumps({"_id": f"q{q}", "text": " ".join(words)}))
        sharing = [i for i, d in enumerate(docs) if set(words) & set(d.split())] or [0]
        qrels += [f"q{q}\t{i}\t1\n" for i in sorted(set(rnd.choices(sharing, k=2)))]
    (root / "queries.train.jsonl").write_text("\n".join(queries))
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(qrels))
    return root


def test_fusion_bench_prints_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITKB_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("GITKB_EMBEDDING_MODEL", "hashing-384")
    data, home = _beir(tmp_path / "tiny"), tmp_path / "home"
    bench = _load()
    figures = bench.main(["--data", str(data), "--home", str(home), "--index", "tiny", "--top-n", "5"])
    out = capsys.readouterr().out
    for row in (
        "RRF k=5",
        "RRF k=60",
        "score fusion w=0.4",
        "DBSF w=0.4",
        "raw cosine + min-max BM25 w=0.4",
        "max-norm BM25 + min-max cosine w=0.35",
        "keyword alone",
        "semantic alone",
        "title weight 0.3",
    ):
        assert row in out, out
    assert all(0.0 <= v <= 1.0 for v in figures.values()) and len(set(figures.values())) > 1
    # the default row is SEARCH's hybrid ranking itself
    beir = datasets.load_beir(data)
    with Workspace(home) as ws:
        run = {}
        for q, text in beir.queries.items():
            hits = ws.document_index("SEARCH", query=text, index_name="tiny", top_n=5, mode="hybrid")[
                "Results"
            ]
            run[q] = list(dict.fromkeys(d for h in hits if (d := datasets.doc_id_from_path(h["filepath"]))))
    assert figures["score fusion w=0.4 @ 5"] == pytest.approx(bench.ndcg(beir.qrels, run))
    again = bench.main(["--data", str(data), "--home", str(home), "--index", "tiny", "--top-n", "5"])
    assert again == figures and "building index" not in capsys.readouterr().out  # reused
