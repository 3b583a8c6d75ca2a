"""Turn a file's bytes into a ``LoadedText`` (or a ``LoadError`` saying why not).

Rules (stable; chunk coordinates depend on them):

* The text is exactly the file's text: CRLF line ends, front matter and
  trailing whitespace are kept, so character offsets and line numbers of
  chunks match the file. The only change is that a leading byte-order mark
  is dropped (it is not a character of the document).
* Decoding: a UTF-8 BOM, UTF-32 or UTF-16 BOM picks the codec; otherwise
  strict UTF-8, and when that fails cp1252, accepted only if it decodes
  strictly and yields no C0 control characters besides ``\\t \\r \\n \\f``.
  Anything else is ``encoding_error`` naming the offset of the first byte that
  is not UTF-8.
* Binary: a known binary extension, or a NUL byte in the first 8 KiB (after
  BOM detection, so UTF-16 text is not mistaken for binary) -> ``binary``.
* Markdown (``.md .markdown .mdx``): front matter (YAML ``---`` or JSON,
  via python-frontmatter) goes to ``metadata`` with dates turned into ISO
  strings; invalid or non-mapping front matter is ``parse_error``; keys of
  ``required_frontmatter`` that are absent or null are ``missing_frontmatter``.
  Title: front matter ``title``, else the first level-1 ATX heading outside
  code fences (markdown escapes such as ``\\.`` and inline HTML such as
  ``<a name=...></a>`` removed), else the file stem.
  ``required_frontmatter`` applies to markdown only.
* PDF (``.pdf``, or content starting with ``%PDF-`` under a name that is
  not a known text extension): pypdf text of each page
  joined with ``"\\n\\n"``; ``metadata`` holds ``pages``, ``page_offsets``
  (character offset where each page's text starts) and the document's
  ``author``/``subject`` when present. Encrypted (unless the empty password
  opens it), broken, or text-less PDFs are ``parse_error``. Title: the PDF's
  title metadata, else the stem.
* Everything else that decodes: kind ``code`` for source and config
  extensions (``CODE_EXTENSIONS``, ``CODE_FILENAMES``), ``text`` otherwise;
  title is the file name; metadata is empty.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from gitkb.core.file_kinds import (
    BINARY_EXTENSIONS,
    CODE_EXTENSIONS,
    CODE_FILENAMES,
    MARKDOWN_EXTENSIONS,
    PDF_EXTENSIONS,
    TEXT_EXTENSIONS,
    file_name,
)
from gitkb.core.load_errors import LoadError
from gitkb.core.markdown_loading import load_markdown
from gitkb.core.models import LoadedText
from gitkb.core.pdf_loading import load_pdf
from gitkb.core.text_decoding import decode_text


def read_and_load(abs_path: Path, rel_path: str, *, required_frontmatter: Sequence[str] = ()) -> LoadedText:
    """Read ``abs_path`` and load it as the document stored under ``rel_path``."""
    try:
        with open(abs_path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise LoadError("internal_error", f"cannot read {abs_path}: {exc.strerror or exc}") from exc
    return load_bytes(rel_path, data, required_frontmatter=required_frontmatter)


def load_bytes(rel_path: str, data: bytes, *, required_frontmatter: Sequence[str] = ()) -> LoadedText:
    """Load a document's bytes; ``rel_path`` decides the kind by its extension."""
    name = file_name(rel_path)
    ext = os.path.splitext(name)[1].lower()
    known_text = ext in MARKDOWN_EXTENSIONS or ext in TEXT_EXTENSIONS or ext in CODE_EXTENSIONS
    if ext in PDF_EXTENSIONS or (not known_text and data.startswith(b"%PDF-")):
        return load_pdf(rel_path, data)
    if ext in BINARY_EXTENSIONS:
        raise LoadError("binary", f"binary file type {ext}")
    text, _encoding = decode_text(data)
    if ext in MARKDOWN_EXTENSIONS:
        return load_markdown(rel_path, text, required_frontmatter=required_frontmatter)
    kind = "code" if ext in CODE_EXTENSIONS or name in CODE_FILENAMES else "text"
    return LoadedText(text=text, kind=kind, title=name)
