"""A review's staged diff (git's unified format) parsed for display: files, hunks, numbered lines,
the side-by-side pairing, syntax highlighting of each side as a whole (so a code fence that
opens in one line still colours the next), and the changed words inside a changed line: a
deleted line and the added line paired with it (as in the side-by-side view) are compared word
by word (difflib's SequenceMatcher on word, space and punctuation tokens) and the words that
differ are wrapped in ``<mark class="wd">`` in both views, over the syntax colours.

Pure functions of the diff text; the page only renders what ``parse_diff`` returns.
"""

from __future__ import annotations

import html as html_lib
import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from itertools import zip_longest

from markupsafe import Markup

from gitkb.http.ui.render import highlight_lines

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
WORD = re.compile(r"\w+|\s+|[^\w\s]")
HTML_PIECE = re.compile(r"(<[^>]*>)|(&(?:#\d+|#x[0-9a-fA-F]+|\w+);)|([^<&]+)")
MIN_SIMILAR = 0.3  # below this two paired lines are different lines, not an edit of one: no word marks
MAX_TOKENS = 6000  # longer pairs (minified files) are shown as whole changed lines: the matcher is quadratic


@dataclass
class Line:
    kind: str  # "context" | "add" | "del" | "note"
    text: str
    old_no: int | None = None
    new_no: int | None = None
    html: Markup = field(default_factory=Markup)


@dataclass
class Hunk:
    header: str
    lines: list[Line] = field(default_factory=list)

    def rows(self) -> list[tuple[Line | None, Line | None]]:
        """Side by side: context on both sides; a run of deletions paired with the additions after it."""
        out: list[tuple[Line | None, Line | None]] = []
        dels: list[Line] = []
        adds: list[Line] = []

        def flush() -> None:
            out.extend(zip_longest(dels, adds))
            dels.clear()
            adds.clear()

        for line in self.lines:
            if line.kind == "del":
                if adds:
                    flush()
                dels.append(line)
            elif line.kind == "add":
                adds.append(line)
            else:
                flush()
                out.append((line, line))
        flush()
        return out


@dataclass
class FileDiff:
    old_path: str | None
    new_path: str | None
    status: str = "M"  # A | M | D | R
    binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def anchor(self) -> str:
        return "diff-" + re.sub(r"[^A-Za-z0-9_-]+", "-", self.path).strip("-")

    @property
    def added(self) -> int:
        return sum(1 for h in self.hunks for ln in h.lines if ln.kind == "add")

    @property
    def deleted(self) -> int:
        return sum(1 for h in self.hunks for ln in h.lines if ln.kind == "del")


def _strip_prefix(p: str) -> str | None:
    p = p.strip()
    if p == "/dev/null":
        return None
    if p.startswith('"') and p.endswith('"'):
        p = p[1:-1]
    return p[2:] if p[:2] in ("a/", "b/") else p


def _start_file(header: str) -> FileDiff:
    m = re.match(r"^diff --git (\S+) (\S+)$", header)
    if m:
        return FileDiff(_strip_prefix(m.group(1)), _strip_prefix(m.group(2)))
    return FileDiff(None, None)


def parse_diff(text: str) -> list[FileDiff]:
    files: list[FileDiff] = []
    cur: FileDiff | None = None
    hunk: Hunk | None = None
    old_no = new_no = 0
    for raw in (text or "").splitlines():
        if raw.startswith("diff --git "):
            cur, hunk = _start_file(raw), None
            files.append(cur)
            continue
        if cur is None and raw.startswith("#"):
            continue  # notes before the first file (the review's overwrite warning), not part of the diff
        if cur is None:
            cur = FileDiff(None, None)
            files.append(cur)
        m = HUNK.match(raw)
        if m:
            old_no, new_no = int(m.group(1)), int(m.group(3))
            hunk = Hunk(raw)
            cur.hunks.append(hunk)
            continue
        if hunk is None:  # the file's header lines
            if raw.startswith("new file mode"):
                cur.status = "A"
            elif raw.startswith("deleted file mode"):
                cur.status = "D"
            elif raw.startswith("rename from "):
                cur.status, cur.old_path = "R", raw[len("rename from ") :]
            elif raw.startswith("rename to "):
                cur.status, cur.new_path = "R", raw[len("rename to ") :]
            elif raw.startswith("--- "):
                cur.old_path = _strip_prefix(raw[4:]) if cur.status != "A" else None
            elif raw.startswith("+++ "):
                cur.new_path = _strip_prefix(raw[4:]) if cur.status != "D" else None
            elif raw.startswith("Binary files"):
                cur.binary = True
            continue
        tag, body = raw[:1], raw[1:]
        if tag == "+":
            hunk.lines.append(Line("add", body, None, new_no))
            new_no += 1
        elif tag == "-":
            hunk.lines.append(Line("del", body, old_no, None))
            old_no += 1
        elif tag == "\\":
            hunk.lines.append(Line("note", raw))
        else:
            hunk.lines.append(Line("context", body, old_no, new_no))
            old_no += 1
            new_no += 1
    for f in files:
        _highlight(f)
        for h in f.hunks:
            for old, new in h.rows():
                if old is not None and new is not None and old.kind == "del" and new.kind == "add":
                    mark_words(old, new)
    return files


def changed_spans(old: str, new: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]] | None:
    """Character ranges of the words that differ, in ``old`` and in ``new``; None when the lines are
    too different for word marks to help (or identical)."""
    a, b = WORD.findall(old), WORD.findall(new)
    if old == new or len(a) + len(b) > MAX_TOKENS:
        return None
    sm = SequenceMatcher(None, a, b, autojunk=False)
    if sm.ratio() < MIN_SIMILAR:
        return None
    starts_a, starts_b = _starts(a), _starts(b)
    spans_a: list[tuple[int, int]] = []
    spans_b: list[tuple[int, int]] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        if i2 > i1:
            spans_a.append((starts_a[i1], starts_a[i2]))
        if j2 > j1:
            spans_b.append((starts_b[j1], starts_b[j2]))
    return spans_a, spans_b


def _starts(tokens: list[str]) -> list[int]:
    out = [0]
    for t in tokens:
        out.append(out[-1] + len(t))
    return out


def mark_words(old: Line, new: Line) -> None:
    """Wrap the differing words of a paired deleted and added line in ``<mark class="wd">``."""
    spans = changed_spans(old.text, new.text)
    if spans is None:
        return
    for line, ranges in zip((old, new), spans, strict=True):
        line.html = marked_html(line.html, line.text, ranges)


def marked_html(piece: Markup, text: str, ranges: list[tuple[int, int]]) -> Markup:
    """``piece`` (the highlighted HTML of ``text``) with the characters in ``ranges`` inside marks.

    Marks never cross a tag: a run is closed before a syntax span opens or closes and opened again
    after it. When the HTML does not spell ``text`` exactly, the line is escaped and marked alone."""
    inside = [False] * len(text)
    for lo, hi in ranges:
        for k in range(lo, min(hi, len(text))):
            inside[k] = True
    parts = HTML_PIECE.findall(str(piece))
    plain = "".join(html_lib.unescape(e) if e else t for _tag, e, t in parts)
    if plain != text:
        parts = [("", str(Markup.escape(ch)), "") if ch in "<>&\"'" else ("", "", ch) for ch in text]
    out: list[str] = []
    pos, open_ = 0, False
    for tag, entity, chunk in parts:
        if tag:
            if open_:
                out.append("</mark>")
                open_ = False
            out.append(tag)
            continue
        units = [entity] if entity else [ch if ch not in "<>&\"'" else str(Markup.escape(ch)) for ch in chunk]
        for unit in units:
            want = pos < len(inside) and inside[pos]
            if want and not open_:
                out.append('<mark class="wd">')
                open_ = True
            elif not want and open_:
                out.append("</mark>")
                open_ = False
            out.append(unit)
            pos += 1
    if open_:
        out.append("</mark>")
    return Markup("".join(out))  # noqa: S704 - built from escaped pieces and our own tags


def _highlight(f: FileDiff) -> None:
    """Colour each side as one text (hunks joined), then hand every line its own piece."""
    for changed in ("del", "add"):
        side = [ln for h in f.hunks for ln in h.lines if ln.kind in ("context", changed)]
        if not side:
            continue
        html = highlight_lines("\n".join(ln.text for ln in side) + "\n", f.path)
        for ln, piece in zip(side, html, strict=False):
            if ln.kind == changed or changed == "add":  # context lines take the new side's colours
                ln.html = piece
    for h in f.hunks:
        for ln in h.lines:
            if ln.kind == "note":
                ln.html = Markup.escape(ln.text)
