"""How much of the gold answer an ASK answer's lead holds (``ask_lead_recall``).

The lead is the text before the answer's first footnote marker (``[1]``):
what a reader takes as the answer. A long answer holds many words by chance,
so only the lead counts. Words of both are lower-cased, with AWS markdown
escapes (``\\.``) and punctuation removed and common stop words dropped; the
score is the share of the gold answer's distinct words found in the lead
(1.0 for a gold answer of stop words only, when the lead is not empty).
"""

from __future__ import annotations

import re

# Lucene's English stop words (the keyword index's) and the pronouns and auxiliaries of answers.
STOP_WORDS = frozenset(
    (
        "a an and are as at be but by for if in into is it no not of on or such that the their then there "
        "these they this to was will with i you we he she its our your can do does has have"
    ).split()
)
_MARKER = re.compile(r"\[\d+\]")
_WORD = re.compile(r"[^\W_]+")


def answer_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` without markdown escapes, punctuation or stop words."""
    return {w for w in _WORD.findall(text.replace("\\", "").lower()) if w not in STOP_WORDS}


def lead(answer: str) -> str:
    """The text before the first footnote marker (all of it when there is none)."""
    m = _MARKER.search(answer)
    return answer[: m.start()] if m else answer


def lead_recall(answer: str, gold: str) -> float:
    """The share of ``gold``'s words found in ``answer``'s lead (see the module docstring)."""
    want = answer_words(gold)
    got = answer_words(lead(answer))
    if not want:
        return 1.0 if got else 0.0
    return len(want & got) / len(want)
