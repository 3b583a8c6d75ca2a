"""Markdown structure by a line scanner: ATX and setext headings, fenced code blocks, YAML front matter.

``scan_markdown(text)`` gives the headings (start, end, level, title) and the
blocks (fenced code and front matter) that ``gitkb.core.chunking`` uses to keep
code blocks whole and to give each chunk its heading path.

It is a line scanner (only lines starting with one of ``#`~=-`` are looked
at), not markdown-it-py, for speed: ``MarkdownIt("commonmark").parse`` took
15.3 s over the 2,757 awsdocs pages (21 MB) on 2 cores, against a budget of
well under 3 s for chunking all of it. The scanner is checked against
markdown-it in the tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_CANDIDATE_RE = re.compile(r"\n[ \t]*[#`~=-]")
_FRONT_END_RE = re.compile(r"^(?:---|\.\.\.)[ \t\r]*$", re.MULTILINE)
_TAG_RE = re.compile(r"<[^>\n]*>")
_ESCAPE_RE = re.compile(r"\\([!-/:-@\[-`{-~])")
_ORDERED_RE = re.compile(r"\d{1,9}[.)]")
_NOT_PLAIN_START = frozenset("-+*>|<")


@dataclass
class MarkdownLines:
    """What ``scan_markdown`` found, in offsets into the text."""

    headings: list[tuple[int, int, int, str]] = field(default_factory=list)  # start, end, level, title
    blocks: list[tuple[int, int]] = field(default_factory=list)  # fenced code and front matter


def heading_title(raw: str) -> str:
    """Heading text without HTML tags (``<a name=...>`` anchors) and markdown backslash escapes."""
    if "<" in raw:
        raw = _TAG_RE.sub("", raw)
    if "\\" in raw:
        raw = _ESCAPE_RE.sub(r"\1", raw)
    return " ".join(raw.split())


def _indent(line: str, s: str) -> int:
    """Columns before ``s`` in ``line``; a tab goes past the 0-3 spaces a heading allows."""
    n = len(line) - len(s)
    return n + 3 if "\t" in line[:n] else n


def _atx(s: str) -> tuple[int, str] | None:
    """(level, raw title) when ``s`` (a line without its indent) is an ATX heading."""
    rest = s.lstrip("#")
    level = len(s) - len(rest)
    if not 1 <= level <= 6 or (rest and rest[0] not in " \t"):
        return None
    rest = rest.strip()
    body = rest.rstrip("#")  # an optional closing run of '#', after a space
    if not body:
        return level, ""
    return level, body.rstrip() if body[-1] in " \t" else rest


def _plain(line: str) -> bool:
    """Whether ``line`` can be part of a paragraph that a setext underline turns into a heading."""
    s = line.lstrip()
    if not s or _indent(line, s) > 3 or s[0] in _NOT_PLAIN_START or s[:3] in ("```", "~~~"):
        return False
    if s[0] == "#" and _atx(s) is not None:
        return False
    return not (s[0].isdigit() and _ORDERED_RE.match(s))


def scan_markdown(text: str) -> MarkdownLines:
    """ATX and setext headings, fenced code blocks and YAML front matter.

    Only lines whose first non-space char is one of ``#`~=-`` are looked at
    (one regex pass), so the scan costs little more than reading the text.
    """
    md = MarkdownLines()
    n = len(text)
    floor = 0  # setext paragraphs never reach back before this offset
    if text.startswith("---") and text[: text.find("\n") if "\n" in text else n].rstrip() == "---":
        m = _FRONT_END_RE.search(text, 3)
        if m is not None:
            floor = min(m.end() + 1, n)
            md.blocks.append((0, floor))
    fence = ""  # the opening run of the fence we are in
    fence_start = 0
    lines = [m.start() + 1 for m in _CANDIDATE_RE.finditer(text, max(floor - 1, 0))]
    if floor == 0 and text.lstrip(" \t")[:1] in ("#", "`", "~", "=", "-"):
        lines.insert(0, 0)
    for start in lines:
        end = text.find("\n", start)
        end = n if end < 0 else end + 1
        line = text[start:end].rstrip("\r\n")
        s = line.lstrip()
        first = start + len(line) - len(s)
        c = s[0]
        if fence:
            body = s.rstrip()
            if c == fence[0] and len(body) >= len(fence) and body.count(c) == len(body):
                md.blocks.append((fence_start, end))
                fence = ""
            continue
        if c in "`~" and s.startswith(c * 3):
            run = len(s) - len(s.lstrip(c))
            if c == "~" or "`" not in s[run:]:
                fence, fence_start = c * run, first
                continue
        if _indent(line, s) > 3:
            continue
        if c == "#":
            h = _atx(s)
            if h is not None:
                md.headings.append((first, end, h[0], heading_title(h[1])))
            continue
        body = s.rstrip()
        if body.count(c) != len(body):
            continue
        # a setext underline if the lines right above are a plain paragraph
        top = start
        while top > floor:
            above = max(text.rfind("\n", floor, top - 1) + 1, floor)
            if not _plain(text[above : top - 1]):
                break
            top = above
        if top < start and (not md.headings or md.headings[-1][1] <= top):
            para = text[top:start]
            lead = len(para) - len(para.lstrip())
            md.headings.append((top + lead, end, 1 if c == "=" else 2, heading_title(para)))
    if fence:
        md.blocks.append((fence_start, n))
    md.headings.sort()
    return md
