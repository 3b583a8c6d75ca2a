"""A forge whose failed calls are counted (``gitkb_forge_errors_total`` on ``GET /metrics``).

``forge_for`` hands every service this wrapper: each method call that raises is counted by forge
kind, operation and failure kind (``details["kind"]`` of the ``ForgeError``, else the error's
class), and the exception goes on unchanged.
"""

from __future__ import annotations

import functools
from typing import Any, cast

from gitkb.core.errors import GitkbError
from gitkb.core.meters import Meters
from gitkb.forges.base import Forge


class MeteredForge:
    def __init__(self, forge: Forge, kind: str, meters: Meters) -> None:
        self._forge = forge
        self._kind = kind
        self._meters = meters

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._forge, attr)
        if attr.startswith("_") or not callable(value):
            return value

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return value(*args, **kwargs)
            except GitkbError as exc:
                self._meters.forge_error(self._kind, attr, str(exc.details.get("kind") or exc.code))
                raise
            except Exception as exc:
                self._meters.forge_error(self._kind, attr, type(exc).__name__)
                raise

        return call


def metered(forge: Forge, kind: str, meters: Meters) -> Forge:
    return cast(Forge, MeteredForge(forge, kind, meters))
