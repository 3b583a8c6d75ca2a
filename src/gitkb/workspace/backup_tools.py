"""The ``Workspace``'s ``backup`` and ``restore`` methods (``workspace/__init__.py`` binds them with ``tool``,
which asks the policy and builds the envelope), and ``Operator``: the local operator as the caller
of ``restore`` when no workspace is open (``gitkb restore FILE DIR``).

Both actions are admin and offered on neither HTTP nor MCP (see ``core/action_table.py``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitkb.core.config import CREDENTIAL_REFS, Settings, load_settings
from gitkb.core.errors import GitkbError
from gitkb.services.access import policy, principals
from gitkb.services.operations import backup as backups
from gitkb.services.operations import restore as restores
from gitkb.stores.catalog.engine import redact_url


class Operator:
    """What ``tool`` and ``restore`` need of a caller: the principal the policy checks, a home for a
    crash log, and how to open the restored workspace (``opens``: the ``Workspace`` class)."""

    def __init__(self, opens: Callable[..., Any]) -> None:
        self.principal = principals.local()
        self.settings = Settings(home=Path(tempfile.gettempdir()) / "gitkb-restore")
        self.opens = opens

    def _check(self, name: str, params: dict[str, Any]) -> None:
        policy.check(self.principal, name, params)


def backup(self: Any, path: str, progress: Any = None) -> dict[str, Any]:
    """One archive (catalog, gitkb.toml, the clones' branches) at ``path``, taken while others write."""
    return backups.backup(self.ctx, path, progress=progress)


def restore(
    self: Any,
    archive: str,
    directory: str,
    sha256: str | None = None,
    progress: Any = None,
    catalog_url: str | None = None,
    new_workspace_id: bool = False,
) -> dict[str, Any]:
    """A new workspace at ``directory`` (absent or empty) from ``archive``; the caller's workspace is
    untouched. The restored one is opened to rebuild its keyword index and vectors, then closed.
    ``catalog_url``: a PostgreSQL database with no gitkb rows the catalog goes into (an archive of an
    older schema, or of a SQLite catalog, is migrated forward first); else the catalog is a new SQLite
    file in ``directory``."""
    opens = self.opens if isinstance(self, Operator) else type(self)
    out = restores.unpack(archive, directory, sha256, catalog_url)
    # the restored catalog, whatever GITKB_CATALOG_URL or the restored gitkb.toml name
    url = catalog_url or f"sqlite:///{Path(out['directory']) / 'catalog.sqlite3'}"
    try:
        with opens(out["directory"], catalog_url=url) as restored:
            out.update(restores.rebuild(restored.ctx, progress, new_workspace_id=bool(new_workspace_id)))
            if said := _credentials_said(restored.settings):
                out["Warnings"] = [*out.get("Warnings", []), said]
    except GitkbError as exc:  # the files are in place: what is left is derived
        exc.next_steps.append(f"finish the rebuild with `gitkb --home {out['directory']} verify --repair`")
        raise
    named = load_settings(out["directory"], env={}).catalog_url  # what the restored gitkb.toml opens
    if named and named != url:
        out.setdefault("Warnings", []).append(
            f"the restored gitkb.toml names [catalog] url = {redact_url(named)}, the backed-up workspace's "
            f"catalog, not the restored one ({redact_url(url)}): point it at the restored catalog before "
            "this workspace runs, or it opens the old one"
        )
    elif catalog_url:
        out.setdefault("Warnings", []).append(
            f"the catalog is in {redact_url(catalog_url)}: run this workspace with [catalog] url in its "
            "gitkb.toml or GITKB_CATALOG_URL naming it"
        )
    n = len(out.get("differences") or [])
    out["Message"] = (
        f"restored {archive} into {out['directory']} ({sum(out['tables'].values())} catalog rows, "
        f"{len(out['sources'])} clone(s), {out['keyword_chunks']} chunks in the keyword index)"
        + ("; `gitkb verify` agrees" if n == 0 else f"; `gitkb verify` reports {n} difference(s)")
    )
    return out


def _credentials_said(settings: Settings) -> str | None:
    """The secrets the restored gitkb.toml reads on this host and where it sends them: an archive
    from elsewhere could name this host's environment variables or key files for its own hosts."""
    if not settings.credentials:
        return None
    refs = "; ".join(
        f"{c.name}: "
        + ", ".join(
            f"{k} {getattr(c, k)}" for k in CREDENTIAL_REFS if getattr(c, k, None) and k != "username"
        )
        + f" -> {', '.join(c.hosts)}"
        for c in settings.credentials
    )
    return (
        "the restored gitkb.toml reads these secrets of this host and sends them to these hosts when a "
        f"source syncs or pushes: {refs}; check them before the first sync"
    )
