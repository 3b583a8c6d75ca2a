"""A review's staged diff (git's unified format) parsed for display: files, hunks, numbered lines,
the side-by-side pairing, and syntax highlighting of each side as a whole (so a code fence that
opens in one line still colours the next).

Pure functions of the diff text; the page only renders what ``parse_diff`` returns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import zip_longest

from markupsafe import Markup

from gitkb.http.ui.render import highlight_lines

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")


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
    return files


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
