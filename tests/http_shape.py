"""Moved to helpers/http_shape.py (``from helpers import error_code``); this re-export keeps
branches written before the move importing. Remove once they are merged."""

from helpers.http_shape import error_code, error_message

__all__ = ["error_code", "error_message"]
