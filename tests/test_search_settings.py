"""Per-index ranking settings (issue 5): BM25 k1/b by rescoring tantivy's explanations, and
SET_SEARCH_SETTINGS / CREATE_INDEX settings validated before anything is written; the CLI
``gitkb index tune`` and the HTTP route only translate. Real tantivy, SQLite, Click and FastAPI."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitkb import Workspace
from gitkb.cli.main import cli
from gitkb.stores.keyword_schema import KeywordDoc, rescore
from gitkb.stores.keywords import KeywordIndex
from helpers import ok

SHORT = "Kafka brokers restart."
# The long text mentions kafka three times among many other words.
LONG = (
    "Kafka "
    + " ".join(f"filler{i}" for i in range(60))
    + " kafka "
    + " ".join(f"other{i}" for i in range(60))
    + " kafka."
)


@pytest.fixture
def kw(tmp_path: Path) -> Iterator[KeywordIndex]:
    k = KeywordIndex(tmp_path / "kw")
    k.apply(
        [],
        [
            KeywordDoc(1, "ix", None, "Runbook", SHORT),
            KeywordDoc(2, "ix", None, "Notes", LONG),
            KeywordDoc(3, "ix", None, "Other", "Nothing relevant here at all."),
        ],
    )
    k.commit()
    try:
        yield k
    finally:
        k.close()


def test_rescoring_with_tantivys_own_parameters_reproduces_its_scores(kw: KeywordIndex) -> None:
    native = kw.search("kafka brokers", index_ids=["ix"], limit=10)
    same = kw.search("kafka brokers", index_ids=["ix"], limit=10, bm25=(1.2, 0.75001))
    assert [c for c, _ in native] == [c for c, _ in same]
    for (_, a), (_, b) in zip(native, same, strict=True):
        assert abs(a - b) / a < 1e-3


def test_b_zero_stops_length_normalisation_and_reorders(kw: KeywordIndex) -> None:
    # With length normalisation (b=0.75) the short chunk wins on "kafka"; without it (b=0)
    # three occurrences beat one, whatever the length.
    assert kw.search("kafka", index_ids=["ix"], limit=2)[0][0] == 1
    assert kw.search("kafka", index_ids=["ix"], limit=2, bm25=(1.2, 0.0))[0][0] == 2
    # k1 = 0: term frequency and length no longer count at all; only idf remains.
    flat = dict(kw.search("kafka", index_ids=["ix"], limit=2, bm25=(0.0, 0.75)))
    assert abs(flat[1] - flat[2]) < 1e-9


def test_rescore_leaves_nodes_it_does_not_know_alone() -> None:
    assert rescore({"value": 0.0, "description": "Const"}, 0.9, 0.4) == 0.0
    node = {
        "value": 3.0,
        "description": "BooleanClause. sum of ...",
        "details": [
            {"value": 1.0, "description": "Something new"},
            {
                "value": 2.0,
                "description": "Boost x2 of ...",
                "details": [
                    {
                        "value": 1.0,
                        "description": "TermQuery, product of...",
                        "details": [
                            {"value": 2.2, "description": "(K1+1)"},
                            {"value": 1.0, "description": "idf, computed as ..."},
                            {
                                "value": 0.5,
                                "description": "freq / (freq + k1 * (1 - b + b * dl / avgdl))",
                                "details": [
                                    {
                                        "value": 2.0,
                                        "description": "freq, occurrences of term within document",
                                    },
                                    {"value": 10.0, "description": "dl, length of field"},
                                    {"value": 10.0, "description": "avgdl, average length of field"},
                                ],
                            },
                        ],
                    },
                ],
            },
        ],
    }
    # 1.0 kept + 2 x idf 1 x (k1 + 1) x 2 / (2 + k1) with k1 = 1, dl = avgdl: 1 + 2 x 2 x 2/3.
    assert abs(rescore(node, 1.0, 0.4) - (1.0 + 2 * 2 * 2 / 3)) < 1e-9


@pytest.fixture
def ws(make_ws: Callable[..., Workspace]) -> Workspace:
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
    ok(w.document_index("ADD_TEXT", index_name="kb", text=SHORT, filepath="short.txt"))
    ok(w.document_index("ADD_TEXT", index_name="kb", text=LONG, filepath="long.txt"))
    return w


def _top(w: Workspace) -> str:
    res = ok(w.document_index("SEARCH", query="kafka", index_name="kb", mode="keyword"))
    return str(res["Results"][0]["filepath"])


def test_index_bm25_settings_change_the_ranking_and_can_be_dropped(ws: Workspace) -> None:
    assert _top(ws) == "short.txt"
    out = ok(ws.document_index("SET_SEARCH_SETTINGS", index_name="kb", settings={"bm25_b": 0.0}))
    assert out["search"] == {"bm25_b": 0.0} and out["effective"]["bm25_b"] == 0.0
    assert out["effective"]["bm25_k1"] == 1.2 and out["effective"]["fusion"] == "score"
    assert out["from"]["bm25_b"] == "index" and out["from"]["bm25_k1"] == "default"
    assert _top(ws) == "long.txt"
    stats = ok(ws.document_index("GET_INDICES_STATS"))["Stats"]["kb"]
    assert stats["search_settings"] == {"bm25_b": 0.0}
    out = ok(ws.document_index("SET_SEARCH_SETTINGS", index_name="kb", settings={"bm25_b": None}))
    assert out["search"] == {} and _top(ws) == "short.txt"
    ok(ws.document_index("SET_SEARCH_SETTINGS", index_name="kb", settings={"fusion": "rrf", "rrf_k": 5}))
    assert ok(ws.document_index("SET_SEARCH_SETTINGS", index_name="kb", reset=True))["search"] == {}


@pytest.mark.parametrize(
    "settings",
    [
        {"bm25_b": 1.5},
        {"bm25_k1": -1},
        {"semantic_weight": True},
        {"fusion": "max"},
        {"rrf_k": "60"},
        {"typo_key": 1},
    ],
)
def test_bad_search_settings_are_refused_and_nothing_is_written(
    ws: Workspace, settings: dict[str, Any]
) -> None:
    ok(ws.document_index("SET_SEARCH_SETTINGS", index_name="kb", settings={"bm25_k1": 0.9}))
    r = ws.document_index("SET_SEARCH_SETTINGS", index_name="kb", settings=settings)
    assert r["Success"] is False and r["code"] == "invalid_argument", r
    assert ok(ws.document_index("GET_INDICES_STATS"))["Stats"]["kb"]["search_settings"] == {"bm25_k1": 0.9}
    r = ws.document_index("CREATE_INDEX", index_name="kb2", settings={"search": settings})
    assert r["Success"] is False and r["code"] == "invalid_argument", r
    assert "kb2" not in ok(ws.document_index("LIST_INDICES"))["Indices"]


def test_set_search_settings_needs_something_to_set(ws: Workspace) -> None:
    r = ws.document_index("SET_SEARCH_SETTINGS", index_name="kb")
    assert r["Success"] is False and r["code"] == "invalid_argument"
    for settings in ({"bm25_b": 0.5}, None):  # unknown index first, whatever else is wrong
        r = ws.document_index("SET_SEARCH_SETTINGS", index_name="nope", settings=settings)
        assert r["Success"] is False and r["code"] == "not_found"


def test_cli_index_tune_shows_and_sets(ws: Workspace) -> None:
    home = str(ws.ctx.settings.home)
    ws.close()
    runner = CliRunner()
    r = runner.invoke(
        cli, ["--home", home, "--json", "index", "tune", "kb", "--bm25-k1", "0.9", "--bm25-b", "0.4"]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["search"] == {"bm25_k1": 0.9, "bm25_b": 0.4}
    r = runner.invoke(cli, ["--home", home, "index", "tune", "kb", "--unset", "bm25_k1"])
    assert r.exit_code == 0, r.output
    lines = {ln.split()[0]: ln.split()[-1] for ln in r.stdout.splitlines()[3:] if ln.strip()}
    assert lines["bm25_b"] == "index" and lines["bm25_k1"] == "default", r.stdout
    r = runner.invoke(cli, ["--home", home, "--json", "index", "tune", "nope"])
    assert r.exit_code == 1 and json.loads(r.stdout)["code"] == "not_found"
    r = runner.invoke(cli, ["--home", home, "--json", "index", "tune", "kb"])
    assert r.exit_code == 0 and json.loads(r.stdout)["search"] == {"bm25_b": 0.4}
    r = runner.invoke(cli, ["--home", home, "--json", "index", "tune", "kb", "--semantic-weight", "2"])
    assert r.exit_code == 1 and json.loads(r.stdout)["code"] == "invalid_argument"


@pytest.mark.parametrize("toml", ['[search]\nfusion = "rff"\n', "[search]\nsemantic_wieght = 0.5\n"])
def test_a_bad_search_section_in_gitkb_toml_is_an_error_not_a_silent_default(
    tmp_path: Path, toml: str
) -> None:
    home = tmp_path / "ws"
    home.mkdir()
    (home / "gitkb.toml").write_text(toml)
    with Workspace(home, embedding_provider="hashing", embedding_model="hashing-384") as w:
        ok(w.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
        r = w.document_index("SEARCH", query="anything", index_name="kb")
        assert r["Success"] is False and r["code"] == "invalid_argument", r
        assert "gitkb.toml [search]" in r["Error"]
        r = w.document_index("GET_SEARCH_SETTINGS", index_name="kb")
        assert r["Success"] is False and "gitkb.toml [search]" in r["Error"], r
        assert ok(w.document_index("GET_INDICES_STATS"))["Stats"]["kb"]["search_settings"] == {}
