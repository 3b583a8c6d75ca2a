"""ASK's reading of markdown: which sentences of a passage may be quoted, and where they are.

A passage (a chunk) may start or end mid-sentence, so sentences are cut from
the whole lines it touches. Headings, code blocks, table rules and bare links
are never quoted; list items and table rows stand alone; a sentence ending in
``:`` takes the lines it introduces (``with_list``). Every range returned is a
``(start, end)`` into the document's stored text, so a quote is always
``text[start:end]`` verbatim.
"""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"""[.!?]["')\]*_]*\s+(?=[\[("'`*_]?[A-Z0-9])""")
_FENCE = re.compile(r"\s{0,3}(```|~~~)")
_FENCE_LINE = re.compile(r"(?m)^\s{0,3}(?:```|~~~)")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)|<[^>]+>")
_HEADING = re.compile(r"\s{0,3}#{1,6}(\s|$)")
_TABLE_RULE = re.compile(r"\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LEAD = re.compile(r"\s*(?:>\s*)*(?:[-*+]\s+|\d{1,3}[.)]\s+)?(?:\|\s*)?")
_TRAIL = re.compile(r"(?:\s*\|)?\s*$")
WORDS = re.compile(r"\w+")


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
    return len(WORDS.findall(_LINK.sub(r"\1", st))) >= 3


def with_list(text: str, start: int, end: int, budget: int) -> int:
    """Where a quote ``text[start:end]`` ends: a sentence ending in ':' (``one of the following
    states:``) takes the lines it introduces, up to the next heading or code block and within
    ``budget`` characters, cut at a line end; any other keeps its end."""
    if not text[start:end].rstrip().endswith(":"):
        return end
    out = end
    pos = text.find("\n", end)
    limit = start + max(budget, end - start)
    while 0 <= pos < len(text):
        nxt = text.find("\n", pos + 1)
        line_end = len(text) if nxt < 0 else nxt
        line = text[pos + 1 : line_end]
        if _HEADING.match(line) or _FENCE.match(line) or line_end > limit:
            break
        if line.strip():
            out = pos + 1 + len(line.rstrip())
        pos = nxt
    return out


def table_header(text: str, pos: int) -> str:
    """The header row of the markdown table whose row holds ``pos`` ('' outside a table, and for
    the header row itself): a row's cells mean what its header says (``| Instance type | ... |``)."""
    line_start = text.rfind("\n", 0, pos) + 1
    if not text.startswith("|", line_start) and not text[line_start:pos].lstrip().startswith("|"):
        return ""
    rows: list[tuple[int, int]] = []
    start = line_start
    while start > 0:
        prev = text.rfind("\n", 0, start - 1) + 1
        if not text[prev : start - 1].lstrip().startswith("|"):
            break
        rows.append((prev, start - 1))
        start = prev
    if len(rows) < 2 or not _TABLE_RULE.match(text[rows[-2][0] : rows[-2][1]]):
        return ""
    return text[rows[-1][0] : rows[-1][1]]
