"""Moved to helpers/results.py (``from helpers import ok, fails``); this re-export keeps
branches written before the move importing. Remove once they are merged."""

from helpers.results import fails, ok

__all__ = ["fails", "ok"]
