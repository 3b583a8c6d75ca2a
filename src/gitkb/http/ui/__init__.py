"""The web page for reviewers and operators, served by the same app at ``/ui``.

Server-rendered Jinja2 pages (``gitkb/http/templates/ui``) with a little plain JavaScript for the
live status panel (``gitkb/http/static/ui``); no build step, no CDN. Pages call the same Workspace
methods as the API (``page.ws_call``) and hold no logic of their own:

* ``/ui``: overview with the live status panel; ``/ui/status.json`` is what it polls
* ``/ui/reviews`` (pending, newest first; ``?tab=history`` for decided ones), ``/ui/reviews/{id}``
  with the staged diff (``?view=split|unified``), Approve and Deny forms
* ``/ui/indexes``: indexes with counts, embedding identity, needs_reindex, sources' last sync
* ``/ui/search`` (``tab=search|ask``) and ``/ui/doc`` (a document at the cited lines)
* ``/ui/login``, ``/ui/logout``: the API's bearer token in an HTTP-only cookie (``session``)
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from gitkb.http.ui import pages, reviews
from gitkb.http.ui.render import STATIC_DIR, build_templates
from gitkb.http.ui.session import UiState

__all__ = ["mount_ui"]


def mount_ui(app: FastAPI) -> None:
    """Add the page's routes and its static files (``/ui/static``) to ``app``."""
    app.state.gitkb_ui = UiState(home=app.state.gitkb.settings.home, templates=build_templates())
    app.mount("/ui/static", StaticFiles(directory=str(STATIC_DIR / "ui")), name="ui-static")
    app.include_router(reviews.router)
    app.include_router(pages.router)
