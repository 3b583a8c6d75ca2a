"""A PDF as a document: pypdf's text of each page, page offsets and the document's metadata.

The rules are in :mod:`gitkb.core.loading`. No I/O here.
"""

from __future__ import annotations

import io
import warnings
from typing import Any

from gitkb.core.file_kinds import file_stem
from gitkb.core.load_errors import LoadError, one_line
from gitkb.core.models import LoadedText


def load_pdf(rel_path: str, data: bytes) -> LoadedText:
    """PDF bytes -> ``LoadedText`` with page texts joined by a blank line."""
    import pypdf  # imported here: loading it costs ~100 ms and most corpora hold no PDF

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader = pypdf.PdfReader(io.BytesIO(data))
            if reader.is_encrypted:
                try:
                    opened = reader.decrypt("")
                except Exception as exc:
                    raise LoadError("parse_error", f"encrypted PDF: {one_line(str(exc))}") from exc
                if not opened:
                    raise LoadError("parse_error", "encrypted PDF (a password is required)")
            pages = [(page.extract_text() or "").replace("\x00", "") for page in reader.pages]
            info = reader.metadata
            title = _info_str(info, "title")
            author = _info_str(info, "author")
            subject = _info_str(info, "subject")
    except LoadError:
        raise
    except Exception as exc:  # pypdf raises many types for broken files
        raise LoadError("parse_error", f"unreadable PDF: {type(exc).__name__}: {one_line(str(exc))}") from exc
    offsets: list[int] = []
    position = 0
    for page_text in pages:
        offsets.append(position)
        position += len(page_text) + 2
    text = "\n\n".join(pages)
    if not text.strip():
        raise LoadError("parse_error", "no extractable text")
    metadata: dict[str, Any] = {"pages": len(pages), "page_offsets": offsets}
    if author:
        metadata["author"] = author
    if subject:
        metadata["subject"] = subject
    return LoadedText(text=text, kind="pdf", title=title or file_stem(rel_path), metadata=metadata)


def _info_str(info: Any, attr: str) -> str | None:
    if info is None:
        return None
    try:
        value = getattr(info, attr, None)
    except Exception:
        return None
    if value is None:
        return None
    cleaned = " ".join(str(value).split())
    return cleaned or None
