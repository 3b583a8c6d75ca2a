"""Forges: where change requests (PRs, MRs) live.

Public API::

    from gitkb.forges import (
        ChangeRequest, Forge, ForgeConfig, open_or_update,   # the protocol
        FORGES, ForgeFactory, register_forge, create_forge,  # the registry
        Secret, load_secret, redact,                         # credentials
    )

Every failure is a :class:`gitkb.core.errors.ForgeError` whose
``details["kind"]`` is one of :data:`gitkb.forges.failures.KINDS`.
"""

from __future__ import annotations

from .base import ChangeRequest, ChangeState, FileStatus, Forge, ForgeConfig, changed_file, open_or_update
from .failures import KINDS
from .registry import FORGES, ForgeFactory, create_forge, register_forge
from .secrets import Secret, check_secrets_file, load_secret, redact

__all__ = [
    "FORGES",
    "KINDS",
    "ChangeRequest",
    "ChangeState",
    "FileStatus",
    "Forge",
    "ForgeConfig",
    "ForgeFactory",
    "Secret",
    "changed_file",
    "check_secrets_file",
    "create_forge",
    "load_secret",
    "open_or_update",
    "redact",
    "register_forge",
]
