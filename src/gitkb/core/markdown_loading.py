"""Markdown as a document: front matter to metadata, the title from it or the first H1.

The rules are in :mod:`gitkb.core.loading`. No I/O here.
"""

from __future__ import annotations

import datetime as _dt
import io
import re
from collections.abc import Sequence
from typing import Any

import frontmatter
import yaml
from frontmatter.default_handlers import YAMLHandler

from gitkb.core.file_kinds import file_stem
from gitkb.core.load_errors import LoadError, one_line
from gitkb.core.models import LoadedText

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_H1 = re.compile(r"^ {0,3}#(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def load_markdown(rel_path: str, text: str, *, required_frontmatter: Sequence[str] = ()) -> LoadedText:
    """Markdown text -> ``LoadedText``; the stored text keeps the front matter."""
    metadata, body = split_frontmatter(text)
    missing = [key for key in required_frontmatter if metadata.get(key) is None]
    if missing:
        raise LoadError("missing_frontmatter", "missing front matter key(s): " + ", ".join(missing))
    title = _frontmatter_title(metadata) or first_h1(body) or file_stem(rel_path)
    return LoadedText(text=text, kind="markdown", title=title, metadata=metadata)


def split_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """``(metadata, body)``; ``({}, text)`` without front matter.

    Raises ``LoadError("parse_error")`` for front matter that is unterminated,
    not valid YAML/JSON, or not a mapping.
    """
    handler = frontmatter.detect_format(text, frontmatter.handlers)
    if handler is None:
        return {}, text
    try:
        raw, body = handler.split(text)
    except ValueError as exc:
        raise LoadError("parse_error", "front matter is not closed") from exc
    try:
        loaded = yaml.safe_load(raw) if isinstance(handler, YAMLHandler) else handler.load(raw)
    except (yaml.YAMLError, ValueError) as exc:
        raise LoadError("parse_error", f"invalid front matter: {one_line(str(exc))}") from exc
    if loaded is None:
        return {}, body
    if not isinstance(loaded, dict):
        raise LoadError("parse_error", f"front matter must be a mapping, got {type(loaded).__name__}")
    return {str(k): _json_safe(v) for k, v in loaded.items()}, body


def first_h1(markdown: str) -> str | None:
    """The first level-1 ATX heading outside fenced code, cleaned; ``None`` if none."""
    fence: str | None = None
    for raw_line in io.StringIO(markdown):  # lazily: the heading is usually on line 1
        line = raw_line.rstrip("\r\n")
        match = _FENCE.match(line)
        if fence is not None:
            if match and _closes(match.group(1), fence, line):
                fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        heading = _H1.match(line)
        if heading:
            title = clean_title(heading.group(1) or "")
            if title:
                return title
    return None


def _closes(marker: str, fence: str, line: str) -> bool:
    """A closing fence: same character, at least as long, nothing after it."""
    return marker[0] == fence[0] and len(marker) >= len(fence) and not line.strip().lstrip(fence[0])


def clean_title(raw: str) -> str:
    """Heading text without inline HTML tags or markdown backslash escapes."""
    text = _HTML_TAG.sub("", raw)
    text = _ESCAPE.sub(r"\1", text)
    return " ".join(text.split())


def _frontmatter_title(metadata: dict[str, Any]) -> str | None:
    value = metadata.get("title")
    if value is None:
        return None
    title = " ".join(str(value).split())
    return title or None


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_json_safe(v) for v in value]
    if isinstance(value, _dt.date | _dt.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
