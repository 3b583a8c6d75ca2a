"""The HTTP API (FastAPI): ``create_app(settings)``; served by ``gitkb serve``."""

from __future__ import annotations

from gitkb.http.app import create_app

__all__ = ["create_app"]
