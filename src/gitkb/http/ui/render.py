"""Templates and the few text transforms the pages need: highlighted snippets, syntax-highlighted
lines (Pygments, one ``<span>`` run per line so a line never carries another line's markup),
answer footnote markers, and the date and commit filters.

Everything that goes into a template is escaped here or by Jinja2's autoescape; ``Markup`` is
only ever built from escaped pieces.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape
from starlette.templating import Jinja2Templates

TEMPLATES_DIR = Path(__file__).resolve().parents[1] / "templates"
STATIC_DIR = Path(__file__).resolve().parents[1] / "static"
WORD = re.compile(r"[\w][\w'-]*", re.UNICODE)
SUFFIXES = ("ings", "ing", "ions", "ion", "ies", "es", "ed", "s")


def stem(word: str) -> str:
    """A crude stem, only to decide which words of a snippet to mark (``rotate`` ~ ``rotation``)."""
    w = word.lower().strip("'-")
    for suf in SUFFIXES:
        if len(w) > len(suf) + 2 and w.endswith(suf):
            w = w[: -len(suf)]
            break
    return w[:-1] if len(w) > 3 and w.endswith("e") else w


def query_stems(query: str) -> frozenset[str]:
    return frozenset(stem(m.group()) for m in WORD.finditer(query) if len(m.group()) > 1)


def mark_terms(text: str, query: str) -> Markup:
    """``text`` escaped, with the words that match the query's words wrapped in ``<mark>``."""
    stems = query_stems(query)
    out: list[str] = []
    pos = 0
    for m in WORD.finditer(text):
        if stem(m.group()) in stems:
            out.append(str(escape(text[pos : m.start()])))
            out.append(f"<mark>{escape(m.group())}</mark>")
            pos = m.end()
    out.append(str(escape(text[pos:])))
    return Markup("".join(out))


FOOTNOTE = re.compile(r"\[(\d{1,3})\]")


def link_footnotes(answer: str) -> Markup:
    """An ASK answer escaped, its ``[n]`` markers turned into links to footnote ``#fn-n``."""
    escaped = str(escape(answer))
    return Markup(
        FOOTNOTE.sub(
            lambda m: (
                f'<sup class="fnref"><a href="#fn-{m.group(1)}" id="fnref-{m.group(1)}">'
                f"[{m.group(1)}]</a></sup>"
            ),
            escaped,
        )
    )


# -- syntax highlighting -------------------------------------------------------------------


@cache
def _lexer(filename: str) -> Any:
    try:
        from pygments.lexers import TextLexer, get_lexer_for_filename  # optional: Pygments (below)
        from pygments.util import ClassNotFound  # optional: plain text without Pygments (below)
    except ImportError:  # pragma: no cover - Pygments comes with the installed dependencies
        return None
    opts = {"stripnl": False, "ensurenl": False, "stripall": False}
    try:
        return get_lexer_for_filename(filename or "x.txt", **opts)
    except ClassNotFound:
        return TextLexer(**opts)


def _css_class(ttype: Any) -> str:
    from pygments.token import STANDARD_TYPES  # optional: Pygments, as in _lexer

    while ttype is not None:
        cls = STANDARD_TYPES.get(ttype)
        if cls is not None:
            return str(cls)
        ttype = ttype.parent
    return ""


def highlight_lines(text: str, filename: str) -> list[Markup]:
    """``text`` split into lines (no line ends), each escaped and syntax-highlighted on its own."""
    if not text:
        return []
    raw = text.split("\n")
    if text.endswith("\n"):
        raw.pop()
    lexer = _lexer(filename)
    if lexer is None:  # pragma: no cover - no Pygments
        return [Markup(escape(line)) for line in raw]
    lines: list[list[str]] = [[]]
    for ttype, value in lexer.get_tokens(text):
        cls = _css_class(ttype)
        for i, part in enumerate(value.split("\n")):
            if i:
                lines.append([])
            if part:
                piece = str(escape(part))
                lines[-1].append(f'<span class="{cls}">{piece}</span>' if cls else piece)
    out = [Markup("".join(parts)) for parts in lines[: len(raw)]]
    out.extend(Markup(escape(line)) for line in raw[len(out) :])
    return out


# -- filters -------------------------------------------------------------------------------


def when(ts: float | None) -> str:
    if not ts:
        return "—"
    return dt.datetime.fromtimestamp(float(ts), tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def when_short(ts: float | None) -> str:
    if not ts:
        return "—"
    return dt.datetime.fromtimestamp(float(ts), tz=dt.UTC).strftime("%b %d %H:%M")


def iso(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(float(ts), tz=dt.UTC).isoformat() if ts else ""


def short_sha(sha: str | None) -> str:
    return (sha or "")[:12] or "—"


def score(value: Any) -> str:
    try:
        return f"{float(value):.3f}"
    except (TypeError, ValueError):
        return "—"


def line_range(loc: dict[str, Any] | None) -> str:
    loc = loc or {}
    a, b = loc.get("line_start"), loc.get("line_end")
    if not a:
        return ""
    return f"line {a}" if not b or b == a else f"lines {a}–{b}"


STATUS_NAMES = {"A": "added", "M": "modified", "D": "deleted", "R": "renamed"}


def file_status(code: str) -> str:
    return STATUS_NAMES.get(code, code)


def web_url(url: str | None) -> bool:
    """Only http(s) URLs become links (a forge's URL is data, never ``javascript:``)."""
    return isinstance(url, str) and url.lower().startswith(("https://", "http://"))


def joined(items: Iterable[Any] | None) -> str:
    return ", ".join(str(i) for i in items or []) or "—"


def build_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
    env = templates.env
    env.trim_blocks = True
    env.lstrip_blocks = True
    env.filters.update(
        when=when,
        when_short=when_short,
        iso=iso,
        short_sha=short_sha,
        score=score,
        line_range=line_range,
        file_status=file_status,
        mark_terms=mark_terms,
        link_footnotes=link_footnotes,
        joined=joined,
        web_url=web_url,
    )
    return templates
