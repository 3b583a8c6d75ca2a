"""The Python library: ``Workspace(home)``.

Every public method returns a JSON-serialisable dict with ``Success`` and, on
failure, ``Error`` (one sentence) and ``code`` (stable). It never raises for a
domain error and never returns a traceback; unexpected failures are logged to
``<home>/logs/gitkb.log`` and reported with code ``internal``.
"""

from __future__ import annotations

import functools
import logging
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gitkb.core.config import Settings, load_settings
from gitkb.core.errors import GitkbError
from gitkb.services import actions
from gitkb.services.context import Context

log = logging.getLogger("gitkb")
F = TypeVar("F", bound=Callable[..., dict[str, Any]])


def internal_error_response(home: Path, exc: BaseException) -> dict[str, Any]:
    logdir = home / "logs"
    try:
        logdir.mkdir(parents=True, exist_ok=True)
        with open(logdir / "gitkb.log", "a", encoding="utf-8") as fh:
            fh.write("".join(traceback.format_exception(exc)))
    except OSError:  # pragma: no cover
        pass
    return {
        "Success": False,
        "Error": f"internal error ({type(exc).__name__}: {exc}); details in {logdir / 'gitkb.log'}",
        "code": "internal",
    }


def tool(fn: F) -> F:
    """Translate domain errors into the response shape; never let a traceback out."""

    @functools.wraps(fn)
    def wrapper(self: Workspace, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return fn(self, *args, **kwargs)
        except GitkbError as exc:
            return exc.to_response()
        except Exception as exc:  # noqa: BLE001 - the contract: no traceback leaves a tool
            return internal_error_response(self.settings.home, exc)

    return wrapper  # type: ignore[return-value]


class Workspace:
    """One gitkb installation: catalog, keyword index, vectors, managed repos under ``home``."""

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        settings: Settings | None = None,
        **overrides: Any,
    ) -> None:
        self.settings = settings or load_settings(home, **overrides)
        self.ctx = Context(self.settings)

    @property
    def home(self) -> Path:
        return self.settings.home

    def close(self) -> None:
        self.ctx.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @tool
    def document_index(self, action: str, **params: Any) -> dict[str, Any]:
        """The action API (CREATE_INDEX, ADD_DOCUMENTS, SEARCH, ...); see ``gitkb.services.actions``."""
        return actions.run_action(self.ctx, action, params)
