"""Words that only make a question a question, and the keyword query that is left without them.

BM25 weighs every query word the analyzer keeps, and the English stop list
keeps ``how``, ``what``, ``do``, ``can``, ``I``...: in "how do I throttle a
function" they outweighed ``throttle`` on pages full of "how do I" headings.
``keyword_query`` drops them; identifiers (``c5d.12xlarge``, kept whole) and
numbers always stay. A query made only of such words is searched as given.
"""

from __future__ import annotations

import re

_QUESTION_WORDS = (
    "what which who whom whose when where why how do does did can could should would may might must "
    "i me my we our us you your is are am was were be been has have had"
)
QUESTION_WORDS = frozenset(_QUESTION_WORDS.split())
# The keyword index's own word pattern (stores/keywords.py): dotted identifiers stay whole.
_QUERY_WORDS = re.compile(r"\w+(?:\.\w+)*", re.UNICODE)


def content_words(query: str, extra: frozenset[str] = frozenset()) -> list[str]:
    """The query's words, in order, without question words (nor ``extra``); all of them if none is left."""
    words = _QUERY_WORDS.findall(query)
    kept = [w for w in words if w.lower() not in QUESTION_WORDS and w.lower() not in extra]
    return kept or words


def keyword_query(query: str) -> str:
    """What the keyword side searches for ``query``: its content words (see the module docstring)."""
    return " ".join(content_words(query))
