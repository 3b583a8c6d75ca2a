"""ASK never downgrades in silence: when an index has embeddings but its embedder fails, the answer
carries a warning naming the failure's code (library, CLI ``--json``, HTTP, MCP), and its sentences
are those chosen by words only. A keyword-only index stays silent (words only is its nature).

The embedder fails for real: an OpenAI-compatible identity whose server (a local one, in this
test) is shut down after the vectors were built, so every embedding call meets a closed port."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from mcp import Client

from gitkb import Workspace
from gitkb.cli.main import cli
from gitkb.core.config import load_settings
from gitkb.core.embedders.hashing import HashingEmbedder
from gitkb.http import create_app
from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from gitkb.services.retrieval.ask import AskConfig, extractive_answer, pick_sentences, relevant, retrieve
from helpers import ok

QUESTION = "How do I rotate the payments gateway API keys?"


class _Embeddings(BaseHTTPRequestHandler):
    """A local OpenAI-compatible ``/v1/embeddings`` server (the external service gitkb calls)."""

    backend = HashingEmbedder(dims=32)

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": i, "embedding": v}
            for i, v in enumerate(self.backend.embed_batch(texts))
        ]
        raw = json.dumps({"object": "list", "data": data, "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


class Server:
    def __init__(self) -> None:
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()
        self.up = True

    def stop(self) -> None:
        """Closed: the port refuses every connection from now on."""
        if self.up:
            self.http.shutdown()
            self.http.server_close()
            self.thread.join()
            self.up = False


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()


@pytest.fixture
def openai_home(home: Path, server: Server) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "gitkb.toml").write_text(
        '[embedding]\nprovider = "openai"\nmodel = "m"\n'
        f'options = {{ base_url = "{server.url}", dims = 32, retries = 0, timeout_s = 2 }}\n'
    )
    return home


def _built(openai_home: Path, kb_copy: Path, catalog_url: str | None) -> Workspace:
    w = Workspace(openai_home, catalog_url=catalog_url)
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    return w


def _quotes(r: dict[str, Any]) -> tuple[Any, list[tuple[Any, Any]]]:
    return r["Answer"], [(f["filepath"], f["location"]) for f in r["Footnotes"]]


def _meaning_warnings(r: dict[str, Any]) -> list[str]:
    return [w for w in r.get("Warnings") or [] if w.startswith("meaning is unavailable")]


def test_ask_warns_when_the_embedder_fails_and_answers_by_words(
    openai_home: Path,
    kb_copy: Path,
    server: Server,
    catalog_url: str | None,
    make_ws: Callable[..., Workspace],
    tmp_path: Path,
) -> None:
    w = _built(openai_home, kb_copy, catalog_url)
    try:
        healthy = ok(w.document_index("ASK", query=QUESTION, index_name="kb"))
        assert healthy["mode"] == "hybrid" and "Warnings" not in healthy
        server.stop()
        w.ctx.caches.query_vectors.clear()  # a new question: its vector must be embedded
        w.ctx.caches.text_vectors.clear()
        down = ok(w.document_index("ASK", query=QUESTION, index_name="kb"))
    finally:
        w.close()
    assert down["answered"] and down["mode"] == "keyword"
    (warning,) = _meaning_warnings(down)
    assert "'kb'" in warning and "(store_unavailable: " in warning and "words only" in warning
    assert any(
        x.startswith("semantic search is unavailable") for x in down["Warnings"]
    )  # SEARCH's, passed on

    # the same documents in a keyword-only index: the same answer, and no warning at all
    plain = make_ws(tmp_path / "plain")
    ok(plain.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
    ok(plain.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    words = ok(plain.document_index("ASK", query=QUESTION, index_name="kb"))
    assert "Warnings" not in words
    assert _quotes(down) == _quotes(words)


def test_ask_warns_when_only_the_sentence_vectors_fail(
    openai_home: Path, kb_copy: Path, server: Server, catalog_url: str | None
) -> None:
    """The query's vector is cached (hybrid search works), the sentences' are not: the meaning side
    fails inside the cosines, the answer says so and its sentences are those chosen by words."""
    w = _built(openai_home, kb_copy, catalog_url)
    try:
        ok(
            w.document_index("SEARCH", query=QUESTION, index_name="kb", mode="semantic")
        )  # caches the query's vector
        server.stop()
        w.ctx.caches.text_vectors.clear()
        r = ok(w.document_index("ASK", query=QUESTION, index_name="kb"))
        cfg = AskConfig.from_section(w.ctx.settings.section("ask"))
        passages, qterms, _ = retrieve(
            w.ctx, QUESTION, index_name="kb", indexes=None, top_n=10, mode=None, tenant=None
        )
        by_words = pick_sentences(relevant(passages, cfg), qterms, cfg, question=QUESTION, meaning=None)
    finally:
        w.close()
    assert r["mode"] == "hybrid" and r["answered"]
    (warning,) = r["Warnings"]
    assert warning.startswith("meaning is unavailable for index 'kb' (store_unavailable: ")
    assert r["Answer"] == extractive_answer(by_words)[0]


def test_every_interface_carries_the_warning(
    openai_home: Path, kb_copy: Path, server: Server, catalog_url: str | None
) -> None:
    _built(openai_home, kb_copy, catalog_url).close()
    server.stop()

    res = CliRunner().invoke(cli, ["--home", str(openai_home), "--json", "ask", QUESTION, "--index", "kb"])
    assert res.exit_code == 0, res.output
    cli_out = json.loads(res.stdout)
    assert cli_out["Success"] and _meaning_warnings(cli_out), cli_out
    text = CliRunner().invoke(cli, ["--home", str(openai_home), "ask", QUESTION, "--index", "kb"])
    assert text.exit_code == 0 and "meaning is unavailable for index 'kb'" in text.stderr, text.output

    with TestClient(
        create_app(load_settings(openai_home, catalog_url=catalog_url)), client=("127.0.0.1", 50000)
    ) as c:
        resp = c.post("/ask", json={"query": QUESTION, "index_name": "kb"})
        page = c.get("/ui/search", params={"q": QUESTION, "tab": "ask", "index": "kb"})  # the web page
    assert resp.status_code == 200, resp.text
    http_out = ok(resp.json())
    assert (
        page.status_code == 200 and 'class="alert alert-warn">meaning is unavailable for index' in page.text
    )
    assert _meaning_warnings(http_out), http_out

    w = Workspace(openai_home, catalog_url=catalog_url)
    try:

        async def main() -> Any:
            async with Client(build_server(w)) as client:
                return await client.call_tool(
                    "document_index", {"action": "ASK", "query": QUESTION, "index_name": "kb"}
                )

        result = anyio.run(main)
    finally:
        w.close()
    text = result.content[0].text
    assert not result.is_error, text
    try:
        mcp_out = parse_block(text)
    except ValueError:
        mcp_out = json.loads(text)
    assert _meaning_warnings(mcp_out), mcp_out


def test_eval_qa_reports_the_answers_that_went_by_words_only(
    openai_home: Path, kb_copy: Path, server: Server, catalog_url: str | None
) -> None:
    """``gitkb eval qa`` no longer passes a downgraded run for a plain one: the second run, with the
    embedding server gone after the first (query vectors cached, sentence vectors not), counts the
    ASK answers that carried the warning and names them."""
    qs = [
        {"id": "keys", "question": QUESTION, "doc": "runbooks/rotate-api-keys.md", "answer": "rotate"},
        {
            "id": "passwords",
            "question": "How long must passwords be?",
            "doc": "policies/password-policy.md",
            "answer": "characters",
        },
    ]
    (kb_copy / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    w = Workspace(openai_home, catalog_url=catalog_url)
    try:
        first = ok(w.eval_qa(str(kb_copy), mode="hybrid", index_name="qa"))
        assert first["ask_warnings"] == 0 and "Warnings" not in first
        server.stop()
        w.ctx.caches.text_vectors.clear()
        second = ok(w.eval_qa(str(kb_copy), mode="hybrid", index_name="qa"))
    finally:
        w.close()
    assert second["ask_warnings"] == 2
    (warning,) = second["Warnings"]
    assert warning.startswith("ASK on 2 question(s) (keys, passwords): meaning is unavailable for index 'qa'")
    assert "store_unavailable" in warning
