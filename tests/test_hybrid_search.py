"""SEARCH modes keyword|semantic|hybrid: the real offline model finds a paraphrase keyword
search misses; RRF fusion; per-identity query embedding with a cache; default-mode fallbacks;
results always checked against the catalog; the CLI's --mode and embeddings commands."""

from __future__ import annotations

import functools
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitkb import Workspace
from gitkb.services.retrieval.fusion import rrf
from helpers import fails, ok


@pytest.fixture
def make_ws(make_ws: Callable[..., Workspace]) -> Callable[..., Workspace]:
    """The shared factory with the model ``h1`` (the identities below read ``hashing/h1``)."""
    return functools.partial(make_ws, embedding_model="h1")


def files(resp: dict[str, Any]) -> list[str]:
    return [Path(r["filepath"]).name for r in resp["Results"]]


# -- the real model ----------------------------------------------------------------------------


def test_real_model_finds_paraphrase_that_keyword_search_misses(
    make_ws: Callable[..., Workspace], kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """all-MiniLM-L6-v2 int8, offline (no socket may leave the machine), on example_kb_repo."""
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else ""
        if self.family == socket.AF_UNIX or str(host).startswith("127.") or host in ("localhost", "::1"):
            return real_connect(self, address)
        raise AssertionError(f"network access attempted: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", connect)
    w = make_ws(embedding_provider=None, embedding_model=None)  # the default: fastembed MiniLM
    assert (
        ok(w.document_index("CREATE_INDEX", index_name="kb"))["embedding_identity"]
        == "fastembed/all-minilm-l6-v2"
    )
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    st = ok(w.embeddings_status())
    assert st["fingerprint"] == "fastembed/all-minilm-l6-v2@384" and st["pending_embeddings"] == 0
    for query, target in (
        ("newcomer orientation schedule", "first-week.md"),
        ("how long may we hold on to client information", "data-retention.md"),
    ):
        assert target not in files(ok(w.document_index("SEARCH", query=query, mode="keyword")))
        sem = ok(w.document_index("SEARCH", query=query, mode="semantic", top_n=3))
        assert sem["mode"] == "semantic" and files(sem)[0] == target, sem
        assert sem["Results"][0]["retrievers"] == ["semantic"] and 0 < sem["Results"][0]["score"] <= 1
        hyb = ok(w.document_index("SEARCH", query=query, top_n=3))
        assert hyb["mode"] == "hybrid" and target in files(hyb)


def test_real_model_query_path_gives_the_batch_path_results(
    make_ws: Callable[..., Workspace], kb_copy: Path
) -> None:
    """SEARCH embeds a query on the query path (``embed_query``, the caller's thread); with the
    documents' graph for queries (``query_graph = "exact"``) semantic and hybrid results (ids, order,
    scores) are those of the batch path's vector (``embed_batch``). The default int8 query graph:
    tests/test_embedder_query_graph.py."""
    from gitkb.services.derived.identity import embedder_for
    from gitkb.services.retrieval.semantic import query_key

    # the default model: fastembed MiniLM
    w = make_ws(embedding_provider=None, embedding_model=None, embed_query_graph="exact")
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    identity = "fastembed/all-minilm-l6-v2"
    emb: Any = embedder_for(w.ctx, identity)
    cache = w.ctx.caches.query_vectors
    for q in ("newcomer orientation schedule", "how do I rotate the database password", "on-call"):
        for mode in ("semantic", "hybrid"):
            cache.clear()
            new = ok(w.document_index("SEARCH", query=q, mode=mode, top_n=20))["Results"]
            assert list(cache) == [query_key(identity, q)]
            cache.clear()
            cache[query_key(identity, q)] = emb.embed_batch([q])[0]
            old = ok(w.document_index("SEARCH", query=q, mode=mode, top_n=20))["Results"]
            assert [(r["id"], r["score"]) for r in new] == [(r["id"], r["score"]) for r in old], (q, mode)
            assert len(new) > 3


def test_query_vectors_are_cached_by_identity_and_spacing_free_text(
    make_ws: Callable[..., Workspace], kb_copy: Path
) -> None:
    """The query-vector LRU is keyed by (identity, query with its runs of spaces, tabs and line
    breaks made one space): a query repeated with other spacing is not embedded again."""
    from gitkb.services.derived import identity
    from gitkb.services.retrieval.semantic import QUERY_CACHE_SIZE

    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    emb = identity.embedder_for(w.ctx, "hashing/h1")
    calls: list[list[str]] = []
    real = emb.embed_batch

    def counting(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        return real(texts)

    emb.embed_batch = counting  # type: ignore[method-assign]
    first = ok(w.document_index("SEARCH", query="rotate the  password", mode="semantic"))
    again = ok(w.document_index("SEARCH", query=" rotate\tthe\n password ", mode="semantic"))
    assert calls == [["rotate the password"]]
    assert [r["id"] for r in first["Results"]] == [r["id"] for r in again["Results"]]
    ok(w.document_index("SEARCH", query="Rotate the password", mode="semantic"))
    assert len(calls) == 2  # case is the embedder's business: another entry
    assert QUERY_CACHE_SIZE == 512


def test_search_reads_full_rows_only_for_the_hits_it_cites(
    make_ws: Callable[..., Workspace], kb_copy: Path
) -> None:
    """Candidates are checked against the catalog with a narrow read (no text, no JSON); the full
    chunk and document rows are read once, for the ``top_n`` hits cited (keyword and semantic
    searches fetch 2-4x more candidates than they cite, and read those extra ones only when the
    first fall short). SQLite's statement trace shows it."""
    import re
    import sqlite3

    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    conn = w.ctx.catalog.conn
    if not isinstance(conn, sqlite3.Connection):
        pytest.skip("the statement trace is SQLite's")
    for mode in ("keyword", "semantic"):
        ok(w.document_index("SEARCH", query="database password", mode=mode, top_n=2))  # warm: settings, plan
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            r = ok(w.document_index("SEARCH", query="database password", mode=mode, top_n=2))
        finally:
            conn.set_trace_callback(None)
        assert r["count"] == 2
        full = [x for x in statements if "c.text" in x and "rowid IN" in x]
        assert len(full) == 1, (mode, full)
        ids = re.search(r"rowid IN \(([^)]*)\)", full[0])
        assert ids is not None and len(ids.group(1).split(",")) == 2, (mode, full[0])
        narrow = [x for x in statements if "c.document_rowid, d.tenant" in x]
        checked = len(re.search(r"IN \(([^)]*)\)", narrow[0]).group(1).split(","))  # type: ignore[union-attr]
        # keyword: its first top_n (all live: the extra hits fetched are not read); semantic: the
        # 20 its list keeps for fusion, or every chunk when there are fewer
        chunks = ok(w.embeddings_status())["chunk_count"]
        assert checked == {"keyword": 2, "semantic": min(20, chunks)}[mode], (mode, narrow)


def test_hybrid_cites_the_keyword_sides_hits_on_its_thread(
    make_ws: Callable[..., Workspace], kb_copy: Path
) -> None:
    """A hybrid search's keyword side reads and cites its first ``top_n`` hits on the search thread,
    while the query is embedded; the caller's thread then reads full rows only for the fused hits
    the keyword side did not cite. The answer is the one of the two sides put together."""
    import re
    import sqlite3

    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    conn = w.ctx.catalog.conn
    if not isinstance(conn, sqlite3.Connection):
        pytest.skip("the statement trace is SQLite's")
    q, n = "rotate the database password after an incident", 4
    kw = [r["id"] for r in ok(w.document_index("SEARCH", query=q, mode="keyword", top_n=n))["Results"]]
    ok(w.document_index("SEARCH", query=q, mode="hybrid", top_n=n))  # warm: settings, plan, query vector
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        hyb = ok(w.document_index("SEARCH", query=q, mode="hybrid", top_n=n))["Results"]
    finally:
        conn.set_trace_callback(None)
    others = [r["id"] for r in hyb if r["id"] not in kw]
    assert len(hyb) == n and len(others) < n  # some fused hits are the keyword side's own
    read = [
        m.group(1) for x in statements if "c.text" in x for m in [re.search(r"rowid IN \(([^)]*)\)", x)] if m
    ]
    cids = [int(c) for part in read for c in part.split(",") if c.strip()]
    assert len(cids) == len(others), (statements, others)
    assert all(r["retrievers"] and r["snippet"] for r in hyb)


# -- fusion ------------------------------------------------------------------------------------


def test_rrf_fuses_by_rank_with_tunable_k_and_weights() -> None:
    fused = rrf({"keyword": ["a", "b", "c"], "semantic:x/y": ["b", "d", "a"]}, k=60)
    assert [f.key for f in fused] == ["b", "a", "d", "c"]
    b = fused[0]
    assert b.ranks == {"keyword": 2, "semantic:x/y": 1} and b.retrievers == ["keyword", "semantic"]
    assert b.score == pytest.approx(1 / 62 + 1 / 61)
    # raw scores play no part: only ranks; k=0 makes the head count far more
    assert [f.key for f in rrf({"k": ["a", "b"], "s": ["c", "a"]}, k=0)] == ["a", "c", "b"]
    # ties (same fused score) break by best single rank, then first appearance
    assert [f.key for f in rrf({"k": ["a", "b"], "s": ["b", "a"]})] == ["a", "b"]
    assert [f.key for f in rrf({"k": ["a"], "s": ["a", "a", "z"]})][:1] == ["a"]  # duplicates count once
    weighted = rrf({"keyword": ["a"], "semantic:m": ["b"]}, weights={"semantic": 2.0})
    assert [f.key for f in weighted] == ["b", "a"]
    assert rrf({}) == []
    with pytest.raises(ValueError):
        rrf({"k": ["a"]}, k=-1)


# -- modes and fallbacks -----------------------------------------------------------------------


def test_modes_and_retrievers(make_ws: Callable[..., Workspace], kb_copy: Path) -> None:
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    q = "rotate the payments gateway key"
    kw = ok(w.document_index("SEARCH", query=q, mode="keyword"))
    assert kw["mode"] == "keyword" and all(r["retrievers"] == ["keyword"] for r in kw["Results"])
    hyb = ok(w.document_index("SEARCH", query=q, top_n=5))
    assert hyb["mode"] == "hybrid" and "Warnings" not in hyb
    top = hyb["Results"][0]
    assert files(hyb)[0] == "rotate-api-keys.md" and top["retrievers"] == ["keyword", "semantic"]
    assert set(top["ranks"]) == {"keyword", "semantic"} and set(top["scores"]) == {"keyword", "semantic"}
    for field in (
        "id",
        "index_name",
        "filepath",
        "file_id",
        "document_title",
        "source_uri",
        "location",
        "snippet",
    ):
        assert field in top
    assert ok(w.document_index("SEARCH", query=q, mode="hybrid", top_n=5))["Results"] == hyb["Results"]
    fails(w.document_index("SEARCH", query=q, mode="fuzzy"), "invalid_argument")


def test_default_is_keyword_with_warning_while_vectors_build(
    make_ws: Callable[..., Workspace], kb_copy: Path
) -> None:
    w = make_ws()
    w.ctx.embedding_worker.close()  # vectors stay behind until build_embeddings
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    r = ok(w.document_index("SEARCH", query="database failover"))
    assert r["mode"] == "keyword" and r["Results"]
    assert any("still building" in x and "keyword" in x for x in r["Warnings"])
    assert ok(w.document_index("GET_INDICES_STATS"))["Stats"]["kb"]["vectors"] == "building"
    sem = ok(w.document_index("SEARCH", query="database failover", mode="semantic"))
    assert sem["Results"] == [] and any("still building" in x for x in sem["Warnings"])
    ok(w.build_embeddings())
    after = ok(w.document_index("SEARCH", query="database failover"))
    assert after["mode"] == "hybrid" and "Warnings" not in after
    assert ok(w.document_index("GET_INDICES_STATS"))["Stats"]["kb"]["vectors"] == "ready"


def test_keyword_only_index_never_embeds_and_never_fails_closed(
    make_ws: Callable[..., Workspace], kb_copy: Path
) -> None:
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kw", embeddings=False))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kw", filepath=str(kb_copy / "docs")))
    r = ok(w.document_index("SEARCH", query="database failover"))
    assert r["mode"] == "keyword" and r["Results"] and "Warnings" not in r
    fails(w.document_index("SEARCH", query="database failover", mode="semantic"), "invalid_argument")
    hyb = ok(w.document_index("SEARCH", query="database failover", mode="hybrid"))
    assert hyb["mode"] == "keyword" and any("keyword-only" in x for x in hyb["Warnings"])
    ok(w.build_embeddings())
    assert ok(w.embeddings_status())["collections"] == []
    stats = ok(w.document_index("GET_INDICES_STATS"))["Stats"]["kw"]
    assert stats["embeddings"] is False and stats["vectors"] == "off" and stats["needs_reindex"] is False


def test_cross_index_search_embeds_query_once_per_identity(
    make_ws: Callable[..., Workspace], kb_copy: Path
) -> None:
    w = make_ws()
    ok(
        w.document_index(
            "CREATE_INDEX", index_name="runbooks", embedding_provider="hashing", embedding_model="a"
        )
    )
    ok(
        w.document_index(
            "CREATE_INDEX", index_name="policies", embedding_provider="hashing", embedding_model="b"
        )
    )
    ok(
        w.document_index(
            "CREATE_INDEX", index_name="more-runbooks", embedding_provider="hashing", embedding_model="a"
        )
    )
    ok(w.document_index("ADD_DOCUMENTS", index_name="runbooks", filepath=str(kb_copy / "docs" / "runbooks")))
    ok(w.document_index("ADD_DOCUMENTS", index_name="policies", filepath=str(kb_copy / "docs" / "policies")))
    ok(
        w.document_index(
            "ADD_TEXT",
            index_name="more-runbooks",
            text="Rotate the password of the database.",
            filepath="x.txt",
        )
    )
    ok(w.build_embeddings())
    from gitkb.services.derived import identity

    calls: list[tuple[str, list[str]]] = []
    for ident in ("hashing/a", "hashing/b"):
        emb = identity.embedder_for(w.ctx, ident)
        real = emb.embed_batch

        def counting(texts: list[str], _real: Any = real, _ident: str = ident) -> list[list[float]]:
            calls.append((_ident, list(texts)))
            return _real(texts)

        emb.embed_batch = counting  # type: ignore[method-assign]
    q = "rotate the password"
    r = ok(w.document_index("SEARCH", query=q, mode="semantic", top_n=10))
    assert sorted(calls) == [("hashing/a", [q]), ("hashing/b", [q])]
    assert {x["index_name"] for x in r["Results"]} == {"runbooks", "policies", "more-runbooks"}
    ok(w.document_index("SEARCH", query=q, mode="hybrid", indexes=["runbooks", "policies"]))
    assert len(calls) == 2  # cached per (identity, query)
    only = ok(w.document_index("SEARCH", query=q, mode="semantic", index_name="runbooks"))
    assert {x["index_name"] for x in only["Results"]} == {"runbooks"}  # a shared collection is filtered
    assert collections_of(w) == {"hashing/a": 4, "hashing/b": 2}


def collections_of(w: Workspace) -> dict[str, int]:
    return {c["identity"]: c["count"] for c in ok(w.embeddings_status())["collections"]}


def test_semantic_hits_are_checked_against_the_catalog(
    make_ws: Callable[..., Workspace], kb_copy: Path
) -> None:
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    w.ctx.embedding_worker.close()  # the deletion will not reach the vectors
    ok(w.document_index("DELETE_DOCUMENT", index_name="kb", filepath="docs/runbooks/database-failover.md"))
    r = ok(
        w.document_index("SEARCH", query="promote the replica database failover", mode="semantic", top_n=20)
    )
    assert "database-failover.md" not in files(r) and r["Results"]
    assert (
        collections_of(w)["hashing/h1"] > ok(w.embeddings_status())["chunk_count"]
    )  # the stale vector is still there


def test_semantic_hits_are_checked_in_two_reads_only_when_the_first_falls_short(
    make_ws: Callable[..., Workspace],
) -> None:
    """The semantic side asks the catalog about its first ``limit`` neighbours (the list it keeps),
    and about the extra neighbours it fetched only when some of those are gone: one narrow read of
    ``limit`` ids when all are live, two once one was deleted (its vector not yet removed), with the
    answer the live neighbours in their order either way."""
    import re
    import sqlite3

    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    for i in range(45):
        text = f"note {i} about rotating the database password and failover step {i % 7}\n"
        ok(w.document_index("ADD_TEXT", index_name="kb", text=text, filepath=f"n{i:02d}.md"))
    ok(w.build_embeddings())
    conn = w.ctx.catalog.conn
    if not isinstance(conn, sqlite3.Connection):
        pytest.skip("the statement trace is SQLite's")
    q = "rotate the database password"

    def narrow_reads(top_n: int) -> tuple[list[str], list[int]]:
        w.ctx.caches.query_vectors.clear()
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            r = ok(w.document_index("SEARCH", query=q, mode="semantic", top_n=top_n))
        finally:
            conn.set_trace_callback(None)
        sizes = [
            len(m.group(1).split(","))
            for x in statements
            if "c.document_rowid, d.tenant" in x
            for m in [re.search(r"IN \(([^)]*)\)", x)]
            if m
        ]
        return [x["filepath"] for x in r["Results"]], sizes

    before, sizes = narrow_reads(10)
    assert len(before) == 10 and sizes == [20]  # depth 20 of the 40 neighbours fetched: one read
    whole, _ = narrow_reads(20)
    w.ctx.embedding_worker.close()  # the deletion will not reach the vectors
    ok(w.document_index("DELETE_DOCUMENT", index_name="kb", filepath=before[3]))
    after, sizes = narrow_reads(10)
    assert sizes == [20, 20]  # one of the first 20 is gone: the other 20 fetched are read too
    assert after == [f for f in whole if f != before[3]][:10]


def test_keyword_hits_are_checked_in_two_reads_only_when_the_first_falls_short(
    make_ws: Callable[..., Workspace],
) -> None:
    """The keyword side, too, asks the catalog about its first ``limit`` hits, and about the rest it
    fetched only when some of those do not count (here: another tier than the one asked for)."""
    import re
    import sqlite3

    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
    for i in range(12):
        for tier, words in (("cold", "password password rotation"), ("hot", "password rotation")):
            text = f"{tier} note {i}: {words} for the database, step {i}\n"
            ok(
                w.document_index(
                    "ADD_TEXT", index_name="kb", text=text, filepath=f"{tier}{i:02d}.md", tier=tier
                )
            )
    conn = w.ctx.catalog.conn
    if not isinstance(conn, sqlite3.Connection):
        pytest.skip("the statement trace is SQLite's")

    def search(**kw: Any) -> tuple[list[str], list[int]]:
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            r = ok(w.document_index("SEARCH", query="password rotation", mode="keyword", top_n=5, **kw))
        finally:
            conn.set_trace_callback(None)
        sizes = [
            len(m.group(1).split(","))
            for x in statements
            if "c.document_rowid, d.tenant" in x
            for m in [re.search(r"IN \(([^)]*)\)", x)]
            if m
        ]
        return [x["filepath"] for x in r["Results"]], sizes

    every, sizes = search()
    assert sizes == [5] and all(f.startswith("cold") for f in every)  # 5 of the 20 fetched: one read
    hot, sizes = search(tiers=["hot"])
    assert sizes == [5, 19] and len(hot) == 5 and all(f.startswith("hot") for f in hot)


def test_tenant_and_tier_filters_apply_to_semantic_hits(make_ws: Callable[..., Workspace]) -> None:
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(
        w.document_index(
            "ADD_TEXT", index_name="kb", text="Acme rotates keys monthly.", filepath="acme.txt", tenant="acme"
        )
    )
    ok(
        w.document_index(
            "ADD_TEXT",
            index_name="kb",
            text="Globex rotates keys yearly.",
            filepath="globex.txt",
            tenant="globex",
        )
    )
    ok(
        w.document_index(
            "ADD_TEXT", index_name="kb", text="Everyone rotates keys.", filepath="all.txt", tier="cold"
        )
    )
    ok(w.build_embeddings())
    for mode in ("semantic", "hybrid"):
        assert files(ok(w.document_index("SEARCH", query="rotates keys", mode=mode, tenant="acme"))) == [
            "acme.txt"
        ]
        assert files(ok(w.document_index("SEARCH", query="rotates keys", mode=mode))) == ["all.txt"]
        assert files(ok(w.document_index("SEARCH", query="rotates keys", mode=mode, tiers=["hot"]))) == []


# -- CLI ---------------------------------------------------------------------------------------


def test_cli_search_modes_and_embeddings_commands(
    tmp_path: Path, kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitkb.cli.main import cli

    monkeypatch.setenv("GITKB_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("GITKB_EMBEDDING_MODEL", "h1")
    home = str(tmp_path / "cliws")
    runner = CliRunner()

    def invoke(*args: str) -> Any:
        res = runner.invoke(cli, ["--home", home, *args], catch_exceptions=False)
        return res

    assert invoke("index", "create", "kb").exit_code == 0
    assert invoke("index", "create", "kw", "--no-embeddings").exit_code == 0
    added = invoke("add", "kb", str(kb_copy / "docs"))
    assert added.exit_code == 0, added.output
    res = invoke("--json", "search", "rotate the payments key", "--mode", "hybrid", "--index", "kb")
    data = json.loads(res.output)
    assert (
        res.exit_code == 0
        and data["mode"] == "hybrid"
        and data["Results"][0]["retrievers"] == ["keyword", "semantic"]
    )
    human = invoke("search", "rotate the payments key", "--mode", "semantic")
    assert human.exit_code == 0 and "[semantic]" in human.output
    status = invoke("embeddings", "status")
    assert status.exit_code == 0 and "hashing/h1" in status.output and "hashing_h1_index" in status.output
    js = json.loads(invoke("--json", "embeddings", "status").output)
    assert js["pending_embeddings"] == 0 and js["chunk_count"] > 0
    assert invoke("embeddings", "build").exit_code == 0
    bad = invoke("search", "x", "--mode", "semantic", "--index", "kw")
    assert bad.exit_code == 1 and "keyword-only" in bad.output
    nowait = invoke("add-text", "kb", "A text added without waiting.", "--no-wait")
    assert nowait.exit_code == 0


def test_default_mode_falls_back_to_keyword_when_semantic_fails(
    make_ws: Callable[..., Workspace], kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitkb.core.errors import EmbeddingNotConfigured
    from gitkb.services.retrieval import semantic

    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())

    def broken(*_: Any, **__: Any) -> list[float]:
        raise EmbeddingNotConfigured("the embedding server is down")

    monkeypatch.setattr(semantic, "query_vector", broken)
    r = ok(w.document_index("SEARCH", query="database failover"))
    assert r["mode"] == "keyword" and r["Results"]
    assert any(
        "semantic search is unavailable (embedding_not_configured: the embedding server is down)" in x
        for x in r["Warnings"]
    )
    fails(w.document_index("SEARCH", query="database failover", mode="hybrid"), "embedding_not_configured")


def test_semantic_search_of_one_index_in_a_shared_collection(make_ws: Callable[..., Workspace]) -> None:
    """Unfiltered nearest neighbours when the searched index holds most of the collection,
    Chroma's filter when it holds little: either way only the searched index's chunks come back."""
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="big"))
    ok(w.document_index("CREATE_INDEX", index_name="small"))
    for i in range(12):
        ok(
            w.document_index(
                "ADD_TEXT", index_name="big", text=f"Rotate keys, note {i}.", filepath=f"{i}.txt"
            )
        )
    ok(w.document_index("ADD_TEXT", index_name="small", text="Unrelated gardening advice.", filepath="g.txt"))
    ok(w.build_embeddings())
    small = ok(w.document_index("SEARCH", query="rotate keys", index_name="small", mode="semantic", top_n=5))
    assert files(small) == ["g.txt"]  # a 1/13 share: filtered by Chroma
    big = ok(w.document_index("SEARCH", query="rotate keys", index_name="big", mode="semantic", top_n=12))
    assert len(big["Results"]) == 12 and "g.txt" not in files(big)  # 12/13: unfiltered, then checked


def test_hybrid_runs_the_keyword_side_while_the_query_is_embedded(
    make_ws: Callable[..., Workspace], kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keyword side of a hybrid search runs on a search thread at the same time as the semantic
    side (onnxruntime and tantivy release the GIL): the tantivy search here waits until the query
    embedding has started, which a search that runs the two sides one after the other never lets
    happen. The fused answer is the same as one built from the two sides run alone."""
    import threading

    from gitkb.core.embedders.hashing import HashingEmbedder
    from gitkb.stores.keywords import KeywordIndex

    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    query = "database failover runbook"
    kw = [r["id"] for r in ok(w.document_index("SEARCH", query=query, mode="keyword", top_n=20))["Results"]]
    sem = [r["id"] for r in ok(w.document_index("SEARCH", query=query, mode="semantic", top_n=20))["Results"]]
    w.ctx.caches.query_vectors.clear()

    embedding = threading.Event()
    seen: dict[str, Any] = {}
    real_embed, real_search = HashingEmbedder.embed_batch, KeywordIndex.search

    def embed_batch(self: HashingEmbedder, texts: list[str]) -> list[list[float]]:
        embedding.set()
        return real_embed(self, texts)

    def search(self: KeywordIndex, *a: Any, **k: Any) -> list[tuple[int, float]]:
        seen["overlapped"] = embedding.wait(timeout=5)
        seen["thread"] = threading.current_thread().name
        return real_search(self, *a, **k)

    monkeypatch.setattr(HashingEmbedder, "embed_batch", embed_batch)
    monkeypatch.setattr(KeywordIndex, "search", search)
    hyb = ok(w.document_index("SEARCH", query=query, mode="hybrid", top_n=10))
    assert seen == {"overlapped": True, "thread": seen["thread"]} and seen["thread"].startswith(
        "gitkb-search"
    )
    assert [r["id"] for r in hyb["Results"]] == [
        f.key for f in rrf({"keyword": kw, "semantic:x": sem}, k=60)
    ][:10]
