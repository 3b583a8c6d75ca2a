"""ASK: answer a question from the indexes, every claim footnoted to its source.

Extractive (the offline default): SEARCH (any mode) finds the top passages;
passages are cut into sentences (``ask_text``: markdown-aware, headings, code
and table separators are never quoted); each sentence is scored by the query
words it holds, by meaning (the index's embedder, when it has one) and by
whether it carries the kind of fact asked for (``ask_pick``). The best few
sentences, best first, each quoted verbatim and followed by its ``[n]``
marker, make the answer; quotes of one document on the same or adjacent lines
become one quote, so no location is cited twice.

Shape of the result: ``Answer``; ``Sources`` (full citations, only those
cited, numbered in order of first use: ``[n]`` is ``Sources[n-1]``);
``Footnotes`` (one per quote: ``{marker, id, filepath, location, quote}``;
``location`` is the quote's own line and char range in the document, and
``document[char_start:char_end] == quote``); ``answered``; ``answer_mode``.

Nothing relevant: when no passage holds at least ``min_coverage`` of the
query's terms (or, if ``min_score`` is set, scores under it), ASK says so
instead of answering. Coverage is lexical and mode-independent; a semantic
hit that shares no word with the question is not quoted.

Generative (optional, ``[ask] mode = "generative"`` or ``answer_mode``): see
``gitkb.services.retrieval.ask_llm``; an answer citing no source or a missing one is
rejected and the extractive answer is returned with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gitkb.core.errors import InvalidArgument
from gitkb.core.snippets import location
from gitkb.services.context import Context
from gitkb.services.retrieval import ask_llm
from gitkb.services.retrieval import search as search_service
from gitkb.services.retrieval.ask_meaning import meaning_of
from gitkb.services.retrieval.ask_pick import Meaning, Passage, Sentence, query_terms, score_sentences
from gitkb.services.retrieval.ask_text import WORDS, with_list
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.keyword_schema import analyze

__all__ = ["AskConfig", "Passage", "Sentence", "ask", "pick_sentences", "query_terms"]

# Passages read per question. Measured on the awsdocs dev questions (keyword search), share of
# answers citing the gold page: 3 -> 0.70, 5 -> 0.75, 8 -> 0.80, 10 -> 0.85; ASK p50 +25 ms from 5 to 10.
DEFAULT_TOP_N = 10
# Passages read per document, from SEARCH's best ``FETCH_FACTOR`` x top_n hits. Hybrid search ranks
# documents (``fusion.DOCUMENT_SHARE``), so the best page's chunks come first and its ten chunks could
# be every passage read. Measured on the awsdocs dev questions (top_n 10, 30 hits fetched), ASK cites
# the gold page / lead recall, hybrid: no cap (10 fetched) 0.85 / 0.639, cap 3 0.90 / 0.589, cap 4-7
# 0.95 / 0.639, 30 fetched and no cap 0.80 / 0.639; keyword: 0.90 / 0.589 without, 0.90 / 0.589 at
# caps 4, 6, 7, 8 (0.85 at 5); semantic: 0.85 / 0.680 with or without (caps 4-7).
PER_DOCUMENT = 6
FETCH_FACTOR = 3
ANSWER_MODES = ("extractive", "generative")


@dataclass(frozen=True)
class AskConfig:
    mode: str = "extractive"
    min_coverage: float = 0.5
    min_score: float | None = None
    max_sentences: int = 3
    max_answer_chars: int = 900
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    timeout_s: float = 60.0
    temperature: float = 0.0

    @classmethod
    def from_section(cls, section: dict[str, Any]) -> AskConfig:
        """The ``[ask]`` section of gitkb.toml; unknown or ill-typed keys are refused."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(section) - known)
        if unknown:
            raise InvalidArgument(
                f"unknown [ask] option(s) in gitkb.toml: {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        cfg = cls(**section)
        if cfg.mode not in ANSWER_MODES:
            raise InvalidArgument(f"[ask] mode must be one of {', '.join(ANSWER_MODES)}, got {cfg.mode!r}")
        for name in ("min_coverage", "timeout_s", "temperature"):
            v = getattr(cfg, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
                raise InvalidArgument(f"[ask] {name} must be a non-negative number, got {v!r}")
        if cfg.min_score is not None and (
            isinstance(cfg.min_score, bool) or not isinstance(cfg.min_score, int | float)
        ):
            raise InvalidArgument(f"[ask] min_score must be a number, got {cfg.min_score!r}")
        for name in ("max_sentences", "max_answer_chars"):
            v = getattr(cfg, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidArgument(f"[ask] {name} must be a positive integer, got {v!r}")
        return cfg


def _load_passages(ctx: Context, results: list[dict[str, Any]]) -> list[Passage]:
    texts: dict[str, str] = {}
    out = []
    conn = ctx.catalog.conn
    for rank, c in enumerate(results):
        key = c["file_id"]
        if key not in texts:
            row = doc_rows.get_by_id(conn, c["index_id"], c["file_id"])
            texts[key] = doc_rows.get_text(conn, row.rowid) if row else ""
        loc = c["location"]
        if not texts[key]:
            continue
        out.append(Passage(rank, c, texts[key], int(loc["char_start"]), int(loc["char_end"])))
    return out


def retrieve(
    ctx: Context,
    query: str,
    *,
    index_name: Any,
    indexes: Any,
    top_n: int,
    mode: Any,
    tenant: Any,
    tiers: Any = None,
    warnings: list[str] | None = None,
) -> tuple[list[Passage], list[str], str]:
    """Top passages with their coverage of the query terms; (passages, query terms, mode used).

    ``top_n`` passages at most, at most ``PER_DOCUMENT`` of one document (``per_document``).
    SEARCH's warnings (e.g. hybrid answered by keyword only) are added to ``warnings``."""
    fetch = min(search_service.MAX_TOP_N, top_n * FETCH_FACTOR)
    res = search_service.search(
        ctx, query, index_name=index_name, indexes=indexes, top_n=fetch, mode=mode, tenant=tenant, tiers=tiers
    )
    if warnings is not None:
        warnings.extend(res.get("Warnings") or [])
    qterms = query_terms(query)
    passages = _load_passages(ctx, per_document(res["Results"], top_n, PER_DOCUMENT))
    for p in passages:
        p.terms = set(analyze(p.doc_text[p.start : p.end]))
        p.coverage = len(p.terms.intersection(qterms)) / len(qterms) if qterms else 0.0
    return passages, qterms, str(res.get("mode", mode or ""))


def per_document(hits: list[dict[str, Any]], n: int, cap: int) -> list[dict[str, Any]]:
    """The first ``n`` of ``hits`` (best first) with at most ``cap`` of any one document."""
    out: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], int] = {}
    for h in hits:
        doc = (h["index_id"], h["file_id"])
        seen[doc] = seen.get(doc, 0) + 1
        if seen[doc] <= cap:
            out.append(h)
            if len(out) >= n:
                break
    return out


def relevant(passages: list[Passage], cfg: AskConfig) -> list[Passage]:
    return [
        p
        for p in passages
        if p.coverage >= cfg.min_coverage
        and p.coverage > 0
        and (cfg.min_score is None or float(p.citation.get("score", 0.0)) >= cfg.min_score)
    ]


def pick_sentences(
    passages: list[Passage],
    qterms: list[str],
    cfg: AskConfig,
    *,
    question: str = "",
    meaning: Meaning | None = None,
) -> list[Sentence]:
    """The best quotable sentences, best first (``ask_pick``), within ``max_sentences`` and
    ``max_answer_chars``, none under 0.6 x the best score; a sentence ending in ':' takes its list;
    no two quotes of one document on the same or adjacent lines (``place``)."""
    scored = score_sentences(passages, qterms, question, meaning)
    if not scored:
        return []
    best = scored[0][0]
    chosen: list[Sentence] = []
    seen: set[str] = set()
    for score, sent in scored:
        if len(chosen) >= cfg.max_sentences or score < 0.6 * best:
            break
        norm = " ".join(sent.text.lower().split())
        used = sum(len(c.text) for c in chosen)
        if norm in seen or (chosen and used + len(sent.text) > cfg.max_answer_chars):
            continue
        seen.add(norm)
        end = with_list(sent.passage.doc_text, sent.start, sent.end, cfg.max_answer_chars - used)
        place(chosen, Sentence(sent.passage, sent.start, end, sent.terms))
    return chosen


def _touch(a: Sentence, b: Sentence) -> str:
    """``join`` when two quotes of one document overlap, or lie on the same or adjacent lines with
    only whitespace and markup between them; ``clash`` when on such lines with words between; else ''."""
    if a.passage.citation["file_id"] != b.passage.citation["file_id"]:
        return ""
    x, y = (a, b) if a.start <= b.start else (b, a)
    text = x.passage.doc_text
    if y.start <= x.end:
        return "join"
    if text.count("\n", x.end, y.start) > 1:
        return ""
    return "clash" if WORDS.search(text, x.end, y.start) else "join"


def _joined(a: Sentence, b: Sentence) -> Sentence:
    return Sentence(a.passage, min(a.start, b.start), max(a.end, b.end), a.terms | b.terms)


def place(chosen: list[Sentence], s: Sentence) -> None:
    """Add ``s`` so that no location is quoted twice. Next to a quote already chosen (``_touch``),
    ``s`` extends it when it follows it with only whitespace and markup between (one verbatim quote:
    the next table row, the next sentence); else the better quote, already there, stands for those
    lines and ``s`` is left out, so an answer never starts with a weaker sentence."""
    for i, o in enumerate(chosen):
        t = _touch(o, s)
        if not t:
            continue
        if t == "join" and s.start >= o.start:
            chosen[i] = _joined(o, s)
            for j in range(len(chosen) - 1, -1, -1):  # the longer quote may now reach the next one
                if j != i and chosen[j].start >= chosen[i].start and _touch(chosen[i], chosen[j]) == "join":
                    lo, hi = min(i, j), max(i, j)
                    chosen[lo] = _joined(chosen[i], chosen[j])
                    del chosen[hi]
                    i = lo
        return
    chosen.append(s)


def extractive_answer(sentences: list[Sentence]) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """(Answer, Sources, Footnotes) from chosen sentences, markers numbered by first use."""
    markers: dict[str, int] = {}
    sources: list[dict[str, Any]] = []
    footnotes: list[dict[str, Any]] = []
    parts: list[str] = []
    for s in sentences:
        cid = s.passage.citation["id"]
        if cid not in markers:
            markers[cid] = len(sources) + 1
            sources.append(s.passage.citation)
        m = markers[cid]
        quote = s.text
        parts.append(f"{' '.join(quote.split())} [{m}]")
        footnotes.append(
            {
                "marker": m,
                "id": cid,
                "filepath": s.passage.citation["filepath"],
                "index_name": s.passage.citation["index_name"],
                "location": location(s.passage.doc_text, s.start, s.end),
                "quote": quote,
            }
        )
    return " ".join(parts), sources, footnotes


def _result(query: str, mode: str, answer_mode: str, warnings: list[str], **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"query": query, "answer_mode": answer_mode, "mode": mode, **fields}
    if warnings:
        out["Warnings"] = warnings
    return out


def nothing_found(query: str, mode: str, answer_mode: str, warnings: list[str]) -> dict[str, Any]:
    return _result(
        query,
        mode,
        answer_mode,
        warnings,
        Answer="Nothing relevant found in the indexes for this question.",
        answered=False,
        Sources=[],
        Footnotes=[],
        Message="Nothing relevant found",
    )


def _answered(
    query: str,
    mode: str,
    answer_mode: str,
    answer: str,
    sources: list[dict[str, Any]],
    footnotes: list[dict[str, Any]],
    warnings: list[str],
) -> dict[str, Any]:
    return _result(
        query,
        mode,
        answer_mode,
        warnings,
        Answer=answer,
        answered=True,
        Sources=sources,
        Footnotes=footnotes,
        Message=f"Answer from {len(sources)} source(s)",
    )


def _answer_mode(cfg: AskConfig, answer_mode: Any) -> str:
    chosen = cfg.mode if answer_mode is None else answer_mode
    if chosen not in ANSWER_MODES:
        raise InvalidArgument(f"answer_mode must be one of {', '.join(ANSWER_MODES)}, got {answer_mode!r}")
    if chosen == "generative" and not (cfg.base_url and cfg.model):
        raise InvalidArgument(
            "generative answers need an OpenAI-compatible endpoint",
            next_steps=[
                'set base_url and model in the [ask] section of gitkb.toml, or use answer_mode "extractive"'
            ],
        )
    return str(chosen)


def ask(
    ctx: Context,
    query: Any,
    *,
    index_name: Any = None,
    indexes: Any = None,
    top_n: Any = None,
    mode: Any = None,
    tenant: Any = None,
    tiers: Any = None,
    answer_mode: Any = None,
) -> dict[str, Any]:
    q = search_service.validate_query(query)
    n = search_service.validate_top_n(top_n, default=DEFAULT_TOP_N)
    cfg = AskConfig.from_section(ctx.settings.section("ask"))
    chosen_mode = _answer_mode(cfg, answer_mode)
    warnings: list[str] = []
    passages, qterms, used_mode = retrieve(
        ctx,
        q,
        index_name=index_name,
        indexes=indexes,
        top_n=n,
        mode=mode,
        tenant=tenant,
        tiers=tiers,
        warnings=warnings,
    )
    good = relevant(passages, cfg)
    if not good:
        return nothing_found(q, used_mode, chosen_mode, warnings)
    if chosen_mode == "generative":
        try:
            answer, sources, footnotes = ask_llm.generate(q, good, cfg)
            return _answered(q, used_mode, "generative", answer, sources, footnotes, warnings)
        except ask_llm.Rejected as exc:
            warnings.append(f"generative answer rejected ({exc}); the extractive answer follows")
    sentences = pick_sentences(good, qterms, cfg, question=q, meaning=meaning_of(ctx, q, good, warnings))
    if not sentences:
        return nothing_found(q, used_mode, "extractive", warnings)
    answer, sources, footnotes = extractive_answer(sentences)
    return _answered(q, used_mode, "extractive", answer, sources, footnotes, warnings)
