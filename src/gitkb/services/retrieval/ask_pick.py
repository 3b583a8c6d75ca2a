"""Which sentences answer: candidates of the top passages scored by words, meaning and kind of fact.

A candidate is a quotable sentence (``ask_text``) of a relevant passage that
holds at least one query term. Its score adds:

* words: the idf-weighted share of query terms it holds (idf among the
  candidates), plus half the weight of query bigrams it holds in order
  (``General Purpose SSD``); 15% off for sentences over 60 words;
* meaning: ``MEANING_WEIGHT`` x the cosine of its vector and the question's,
  when the index has an embedder (the best ``MEANING_POOL`` by words are embedded);
* the kind of fact asked for: a question about an amount (how much, how long,
  maximum, limit, ...) favours a sentence with a number (more with a unit)
  that the question does not already hold; a yes/no question favours the
  sentence that holds all its terms (the one that settles it); a sentence that
  is itself a question is marked down;
* a small prior for the passage's search rank.

Pure: the embedder comes in as a function ``texts -> cosines``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gitkb.services.retrieval.ask_text import WORDS, sentence_spans, table_header
from gitkb.services.retrieval.query_words import content_words
from gitkb.stores.keyword_schema import analyze

Meaning = Callable[[list[str]], list[float]]
MEANING_WEIGHT = 0.5  # measured, awsdocs dev hybrid ask_lead_recall: 0 -> 0.589, 0.5 -> 0.639, 1.0 -> 0.639
MEANING_POOL = 24
NO_NUMBER_FACTOR = 0.5
# ASK drops these too: they rarely say what a documentation question is about.
ASK_EXTRA_WORDS = frozenset("there here about get use much many".split())
_AMOUNT_Q = re.compile(
    r"\b(how (much|many|long|large|big|often|fast|soon)|max(imum)?|min(imum)?|limits?|quotas?|"
    r"size|timeout|number of|percentage|capacity|duration|throughput)\b",
    re.IGNORECASE,
)
_YES_NO_Q = re.compile(
    r"\s*(is|are|am|was|were|does|do|did|can|could|should|will|would|has|have|may)\b", re.IGNORECASE
)
_NUMBER = re.compile(r"(?<![\w.\\])(\d[\d,]*(?:\.\d+)?)(?![\w.]*[A-Za-z_])(?!\.\d)(\s*[%x]|\s*[A-Za-z]+)?")
_UNITS = frozenset(
    "seconds second sec secs s minutes minute min mins hours hour hr hrs days day weeks months years ms "
    "milliseconds millisecond microseconds kb mb gb tb pb kib mib gib tib bytes byte bits gbps mbps iops "
    "requests characters items times percent".split()
)


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
    terms = analyze(" ".join(content_words(query, ASK_EXTRA_WORDS))) or analyze(query)
    return list(dict.fromkeys(terms))


def question_kind(question: str) -> str:
    """``amount`` (how much, maximum, limit...), ``yes_no`` (is/does/can... first), else ``other``."""
    if _AMOUNT_Q.search(question):
        return "amount"
    if _YES_NO_Q.match(question):
        return "yes_no"
    return "other"


def numbers(text: str) -> list[tuple[str, bool]]:
    """Numbers standing alone in ``text`` (not inside ``c5d.12xlarge``), each with whether a unit follows."""
    out = []
    for m in _NUMBER.finditer(text.replace("\\", "")):
        unit = (m.group(2) or "").strip().lower()
        out.append((m.group(1), unit in ("%", "x") or unit in _UNITS))
    return out


def fact_score(kind: str, question: str, sentence: str, share: float) -> tuple[float, float]:
    """The kind-of-fact part of a sentence's score: (factor on its words' score, bonus).

    ``share`` is its unweighted share of the query terms. A question about an amount takes the
    words' score at ``NO_NUMBER_FACTOR`` from a sentence without a number the question does not
    already hold, and gives 0.1 for one (0.2 with a unit); a yes/no question gives 0.2 to a
    sentence with all its terms; a sentence that is itself a question loses 0.2."""
    bonus = -0.2 if sentence.rstrip().endswith("?") else 0.0
    if kind == "amount":
        asked = {n for n, _ in numbers(question)}
        found = [unit for n, unit in numbers(sentence) if n not in asked]
        if not found:
            return NO_NUMBER_FACTOR, bonus
        return 1.0, bonus + (0.2 if any(found) else 0.1)
    if kind == "yes_no" and share >= 0.999:
        bonus += 0.2
    return 1.0, bonus


def _candidates(passages: list[Passage]) -> list[tuple[Passage, int, int, list[str], str]]:
    """(passage, start, end, terms, context) of each quotable sentence once; a table row's terms
    and context (what its meaning is judged with) include its table's header row."""
    seqs: list[tuple[Passage, int, int, list[str], str]] = []
    seen_spans: set[tuple[str, int]] = set()
    for p in passages:
        for s, e in sentence_spans(p.doc_text, p.start, p.end):
            key = (p.citation["file_id"], s)
            if key not in seen_spans:  # overlapping chunks of one document
                seen_spans.add(key)
                header = table_header(p.doc_text, s)
                seqs.append((p, s, e, analyze(header + "\n" + p.doc_text[s:e]), header))
    return seqs


def _bigrams(terms: list[str]) -> set[tuple[str, str]]:
    return set(zip(terms, terms[1:], strict=False))


def score_sentences(
    passages: list[Passage], qterms: list[str], question: str, meaning: Meaning | None
) -> list[tuple[float, Sentence]]:
    """Every candidate with its score, best first (ties: document order of the candidates)."""
    seqs = _candidates(passages)
    if not seqs or not qterms:
        return []
    n = len(seqs)
    df = {t: sum(1 for _, _, _, terms, _ in seqs if t in terms) for t in qterms}
    weight = {t: math.log(1 + n / (df[t] + 0.5)) for t in qterms}
    total = sum(weight.values())
    qbigrams = _bigrams(qterms)
    kind = question_kind(question)
    scored: list[tuple[float, int, Sentence]] = []
    context: dict[int, str] = {}
    for i, (p, s, e, terms, header) in enumerate(seqs):
        present = set(terms)
        hit = sum(weight[t] for t in qterms if t in present)
        if hit <= 0:
            continue
        hit += 0.5 * sum((weight[a] + weight[b]) / 2 for a, b in qbigrams & _bigrams(terms))
        text = p.doc_text[s:e]
        length = 0.85 if len(WORDS.findall(text)) > 60 else 1.0
        share = sum(1 for t in qterms if t in present) / len(qterms)
        factor, bonus = fact_score(kind, question, text, share)
        score = (hit / total) * length * factor + bonus + 0.08 / (1 + p.rank)
        scored.append((score, -i, Sentence(p, s, e, frozenset(present))))
        context[-i] = f"{header} {text}" if header else text
    scored.sort(key=lambda x: (x[0], x[1]), reverse=True)
    if meaning is not None and scored:
        pool = scored[:MEANING_POOL]
        sims = meaning([" ".join(context[i].replace("\\", "").split()) for _, i, _ in pool])
        pool = [(sc + MEANING_WEIGHT * sim, i, st) for (sc, i, st), sim in zip(pool, sims, strict=True)]
        scored = sorted(pool, key=lambda x: (x[0], x[1]), reverse=True) + scored[MEANING_POOL:]
    return [(sc, st) for sc, _, st in scored]
