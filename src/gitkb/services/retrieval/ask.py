"""ASK: answer a question from the indexes, every claim footnoted to its source.

Extractive (the offline default): SEARCH (any mode) finds the top passages;
passages are cut into sentences (markdown-aware: headings, code and table
separators are never quoted); each sentence is scored by the query terms it
holds (the keyword index's own analyzer: stemming, stop words), weighted by
how rare each term is among the candidate sentences, plus a small prior for
the passage's rank. The best few sentences, each quoted verbatim and
followed by its ``[n]`` marker, make the answer.

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

import math
import re
from dataclasses import dataclass, field
from typing import Any

from gitkb.core.errors import InvalidArgument
from gitkb.core.snippets import location
from gitkb.services.context import Context
from gitkb.services.retrieval import ask_llm
from gitkb.services.retrieval import search as search_service
from gitkb.stores.catalog import documents as doc_rows
from gitkb.stores.keywords import analyze

# Passages read per question. Measured on the awsdocs dev questions (keyword search), share of
# answers citing the gold page: 3 -> 0.70, 5 -> 0.75, 8 -> 0.80, 10 -> 0.85; ASK p50 +25 ms from 5 to 10.
DEFAULT_TOP_N = 10
ANSWER_MODES = ("extractive", "generative")
# Question words the English stop list keeps; they say nothing about the topic.
_QUESTION_WORDS = (
    "what which who whom whose when where why how do does did can could should would may might must "
    "i me my we our you your is are am was were be been has have had there here about get use"
)
QUESTION_WORDS = frozenset(_QUESTION_WORDS.split())
_SENTENCE_END = re.compile(r"""[.!?]["')\]*_]*\s+(?=[\[("'`*_]?[A-Z0-9])""")
_FENCE = re.compile(r"\s{0,3}(```|~~~)")
_FENCE_LINE = re.compile(r"(?m)^\s{0,3}(?:```|~~~)")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)|<[^>]+>")
_HEADING = re.compile(r"\s{0,3}#{1,6}(\s|$)")
_TABLE_RULE = re.compile(r"\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LEAD = re.compile(r"\s*(?:>\s*)*(?:[-*+]\s+|\d{1,3}[.)]\s+)?(?:\|\s*)?")
_TRAIL = re.compile(r"(?:\s*\|)?\s*$")
_WORDS = re.compile(r"\w+")
_MARKER = re.compile(r"\[(\d+)\]")


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


@dataclass
class Passage:
    rank: int  # 0-based rank in the search results
    citation: dict[str, Any]
    doc_text: str
    start: int  # char range of the chunk in the document
    end: int
    terms: set[str] = field(default_factory=set)
    coverage: float = 0.0


@dataclass(frozen=True)
class Sentence:
    passage: Passage
    start: int  # char range in the document
    end: int
    terms: frozenset[str]

    @property
    def text(self) -> str:
        return self.passage.doc_text[self.start : self.end]


def query_terms(query: str) -> list[str]:
    words = [w for w in _WORDS.findall(query.lower()) if w not in QUESTION_WORDS]
    terms = analyze(" ".join(words)) or analyze(query)
    return list(dict.fromkeys(terms))


def sentence_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Quotable sentence ranges of the lines ``text[start:end]`` touches (a chunk may start or end
    mid-sentence): stripped of markdown lead-ins and trailing pipes, never headings, code or bare links."""
    out: list[tuple[int, int]] = []
    para: list[tuple[int, int]] = []
    start = text.rfind("\n", 0, start) + 1
    nl_end = text.find("\n", max(start, end - 1))
    end = len(text) if nl_end < 0 else nl_end
    in_code = len(_FENCE_LINE.findall(text, 0, start)) % 2 == 1

    def flush() -> None:
        if para:
            _split_paragraph(text, para[0][0], para[-1][1], out)
            para.clear()

    pos = start
    while pos < end:
        nl = text.find("\n", pos, end)
        line_end = end if nl < 0 else nl
        line = text[pos:line_end]
        if _FENCE.match(line):
            flush()
            in_code = not in_code
        elif in_code or not line.strip() or _HEADING.match(line) or _TABLE_RULE.match(line):
            flush()
        elif line.lstrip().startswith(("|", "-", "*", "+", ">")) or re.match(r"\s*\d{1,3}[.)]\s", line):
            flush()  # list items and table rows stand alone
            para.append((pos, line_end))
            flush()
        else:
            para.append((pos, line_end))
        pos = line_end + 1
    flush()
    return out


def _split_paragraph(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    piece = text[start:end]
    cuts = [0] + [m.end() for m in _SENTENCE_END.finditer(piece)] + [len(piece)]
    for a, b in zip(cuts, cuts[1:], strict=False):
        s = start + _LEAD.match(piece, a).end()  # type: ignore[union-attr]
        e = start + b
        tail = _TRAIL.search(text, s, e)
        e = tail.start() if tail else e
        if informative(text[s:e]):
            out.append((s, e))


def informative(sentence: str) -> bool:
    """At least three words outside markup: no bare links, no bold-only procedure titles."""
    st = sentence.strip()
    if (st.startswith("**") and st.endswith("**")) or _LINK.fullmatch(st.rstrip(".\\ ")):
        return False
    return len(_WORDS.findall(_LINK.sub(r"\1", st))) >= 3


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
) -> tuple[list[Passage], list[str], str]:
    """Top passages with their coverage of the query terms; (passages, query terms, mode used)."""
    res = search_service.search(
        ctx, query, index_name=index_name, indexes=indexes, top_n=top_n, mode=mode, tenant=tenant, tiers=tiers
    )
    qterms = query_terms(query)
    passages = _load_passages(ctx, res["Results"])
    for p in passages:
        p.terms = set(analyze(p.doc_text[p.start : p.end]))
        p.coverage = len(p.terms.intersection(qterms)) / len(qterms) if qterms else 0.0
    return passages, qterms, str(res.get("mode", mode or ""))


def relevant(passages: list[Passage], cfg: AskConfig) -> list[Passage]:
    return [
        p
        for p in passages
        if p.coverage >= cfg.min_coverage
        and p.coverage > 0
        and (cfg.min_score is None or float(p.citation.get("score", 0.0)) >= cfg.min_score)
    ]


def _bigrams(terms: list[str]) -> set[tuple[str, str]]:
    return set(zip(terms, terms[1:], strict=False))


def pick_sentences(passages: list[Passage], qterms: list[str], cfg: AskConfig) -> list[Sentence]:
    """The best quotable sentences, best first.

    Score: the idf-weighted share of query terms in the sentence, plus half
    the weight of query bigrams it holds in order (``c5d.12xlarge``,
    ``General Purpose SSD``), a 15% cut for sentences over 60 words, and a
    small prior for the passage's search rank.
    """
    seqs: list[tuple[Passage, int, int, list[str]]] = []
    seen_spans: set[tuple[str, int]] = set()
    for p in passages:
        for s, e in sentence_spans(p.doc_text, p.start, p.end):
            key = (p.citation["file_id"], s)
            if key not in seen_spans:  # overlapping chunks of one document
                seen_spans.add(key)
                seqs.append((p, s, e, analyze(p.doc_text[s:e])))
    if not seqs or not qterms:
        return []
    n = len(seqs)
    df = {t: sum(1 for *_, terms in seqs if t in terms) for t in qterms}
    weight = {t: math.log(1 + n / (df[t] + 0.5)) for t in qterms}
    total = sum(weight.values())
    qbigrams = _bigrams(qterms)
    scored: list[tuple[float, int, Sentence]] = []
    for i, (p, s, e, terms) in enumerate(seqs):
        present = set(terms)
        hit = sum(weight[t] for t in qterms if t in present)
        if hit <= 0:
            continue
        pairs = qbigrams & _bigrams(terms)
        hit += 0.5 * sum((weight[a] + weight[b]) / 2 for a, b in pairs)
        words = len(_WORDS.findall(p.doc_text[s:e]))
        length = 0.85 if words > 60 else 1.0
        score = (hit / total) * length + 0.08 / (1 + p.rank)
        scored.append((score, -i, Sentence(p, s, e, frozenset(present))))
    scored.sort(key=lambda x: (x[0], x[1]), reverse=True)
    if not scored:
        return []
    best = scored[0][0]
    chosen: list[Sentence] = []
    seen: set[str] = set()
    used = 0
    for score, _, sent in scored:
        if len(chosen) >= cfg.max_sentences or score < 0.6 * best:
            break
        norm = " ".join(sent.text.lower().split())
        if norm in seen or (chosen and used + len(sent.text) > cfg.max_answer_chars):
            continue
        seen.add(norm)
        sent = with_list(sent, cfg.max_answer_chars - used)
        chosen.append(sent)
        used += len(sent.text)
    return chosen


def with_list(sent: Sentence, budget: int) -> Sentence:
    """A sentence ending in ':' (``one of the following states:``) takes the lines it introduces,
    up to the next heading or code block and within ``budget`` characters, cut at a line end."""
    text = sent.passage.doc_text
    if not sent.text.rstrip().endswith(":"):
        return sent
    end = sent.end
    pos = text.find("\n", sent.end)
    limit = sent.start + max(budget, len(sent.text))
    while 0 <= pos < len(text):
        nxt = text.find("\n", pos + 1)
        line_end = len(text) if nxt < 0 else nxt
        line = text[pos + 1 : line_end]
        if _HEADING.match(line) or _FENCE.match(line) or line_end > limit:
            break
        if line.strip():
            end = pos + 1 + len(line.rstrip())
        pos = nxt
    return Sentence(sent.passage, sent.start, end, sent.terms)


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


def nothing_found(query: str, mode: str, answer_mode: str, warnings: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "query": query,
        "Answer": "Nothing relevant found in the indexes for this question.",
        "answered": False,
        "answer_mode": answer_mode,
        "mode": mode,
        "Sources": [],
        "Footnotes": [],
        "Message": "Nothing relevant found",
    }
    if warnings:
        out["Warnings"] = warnings
    return out


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
    chosen_mode = cfg.mode if answer_mode is None else answer_mode
    if chosen_mode not in ANSWER_MODES:
        raise InvalidArgument(f"answer_mode must be one of {', '.join(ANSWER_MODES)}, got {answer_mode!r}")
    if chosen_mode == "generative" and not (cfg.base_url and cfg.model):
        raise InvalidArgument(
            "generative answers need an OpenAI-compatible endpoint",
            next_steps=[
                'set base_url and model in the [ask] section of gitkb.toml, or use answer_mode "extractive"'
            ],
        )
    passages, qterms, used_mode = retrieve(
        ctx, q, index_name=index_name, indexes=indexes, top_n=n, mode=mode, tenant=tenant, tiers=tiers
    )
    good = relevant(passages, cfg)
    warnings: list[str] = []
    if not good:
        return nothing_found(q, used_mode, chosen_mode, warnings)
    if chosen_mode == "generative":
        try:
            answer, sources, footnotes = ask_llm.generate(q, good, cfg)
            return _answered(q, used_mode, "generative", answer, sources, footnotes, warnings)
        except ask_llm.Rejected as exc:
            warnings.append(f"generative answer rejected ({exc}); the extractive answer follows")
    sentences = pick_sentences(good, qterms, cfg)
    if not sentences:
        return nothing_found(q, used_mode, "extractive", warnings)
    answer, sources, footnotes = extractive_answer(sentences)
    return _answered(q, used_mode, "extractive", answer, sources, footnotes, warnings)


def _answered(
    query: str,
    mode: str,
    answer_mode: str,
    answer: str,
    sources: list[dict[str, Any]],
    footnotes: list[dict[str, Any]],
    warnings: list[str],
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "query": query,
        "Answer": answer,
        "answered": True,
        "answer_mode": answer_mode,
        "mode": mode,
        "Sources": sources,
        "Footnotes": footnotes,
        "Message": f"Answer from {len(sources)} source(s)",
    }
    if warnings:
        out["Warnings"] = warnings
    return out
