"""``LoadError``: why a file could not be turned into text, as a skip category and a detail."""

from __future__ import annotations

from gitkb.core.models import SKIP_CATEGORIES


class LoadError(Exception):
    """A file that cannot be turned into text; ``category`` is a skip category."""

    def __init__(self, category: str, detail: str) -> None:
        if category not in SKIP_CATEGORIES:
            raise ValueError(f"unknown skip category {category!r}")
        super().__init__(f"{category}: {detail}")
        self.category = category
        self.detail = detail


def one_line(message: str) -> str:
    """A library's message on one line (for a ``LoadError`` detail)."""
    return " ".join(message.split())
