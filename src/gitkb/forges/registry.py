"""The explicit forge registry: ``kind -> factory``.

A factory is ``(config: ForgeConfig) -> Forge``. ``github`` and ``gitlab`` are
built in (imported lazily, so a workspace that never talks to GitHub never
imports github3.py), and so is ``local``, the embedded forge backed by gitkb's
catalog (it reads the catalog from ``config.options["catalog"]``); other kinds
are added with :func:`register_forge`.
"""

from __future__ import annotations

from collections.abc import Callable

from gitkb.core.errors import InvalidArgument

from .base import Forge, ForgeConfig

ForgeFactory = Callable[[ForgeConfig], Forge]


def _github(config: ForgeConfig) -> Forge:
    from .github import GitHubForge  # heavy: github3; optional provider, loaded when chosen

    return GitHubForge(config)


def _gitlab(config: ForgeConfig) -> Forge:
    from .gitlab import GitLabForge  # heavy: gitlab; optional provider, loaded when chosen

    return GitLabForge(config)


def _local(config: ForgeConfig) -> Forge:
    from .local import LocalForge  # heavy: pygit2; optional provider, loaded when chosen

    return LocalForge(config)


FORGES: dict[str, ForgeFactory] = {
    "github": _github,
    "gitlab": _gitlab,
    "local": _local,
}


def register_forge(kind: str, factory: ForgeFactory, *, replace: bool = False) -> None:
    """Add a forge kind. Refuses to shadow an existing kind unless ``replace``."""
    if not kind or not kind.isidentifier():
        raise InvalidArgument(f"forge kind must be an identifier, got {kind!r}")
    if kind in FORGES and not replace:
        raise InvalidArgument(f"forge kind {kind!r} is already registered")
    FORGES[kind] = factory


def create_forge(config: ForgeConfig) -> Forge:
    """Build the forge ``config.kind`` names."""
    factory = FORGES.get(config.kind)
    if factory is None:
        known = ", ".join(sorted(FORGES))
        raise InvalidArgument(
            f"unknown forge kind {config.kind!r}; known kinds: {known}",
            details={"known_kinds": sorted(FORGES)},
        )
    return factory(config)
