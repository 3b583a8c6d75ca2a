"""Moved: the helpers to helpers/sources.py (``from helpers import SOURCE, Upstream, git``), the
fixtures ``git_env``, ``upstream``, ``source_ws`` to conftest.py (no import needed). This
re-export keeps branches written before the move importing. Remove once they are merged."""

from conftest import git_env, source_ws, upstream
from helpers.sources import SOURCE, Upstream, git

__all__ = ["SOURCE", "Upstream", "git", "git_env", "source_ws", "upstream"]
