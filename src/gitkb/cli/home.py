"""Which workspace a CLI command means, found the way git finds a repository.

``--home DIR``, else ``GITKB_HOME``, else the nearest ``.gitkb`` directory found upward
from the current directory (stopping below any ``GITKB_CEILING_DIRECTORIES``, a
``os.pathsep``-separated list, as git's ``GIT_CEILING_DIRECTORIES``). Discovery never
creates anything: a command with no workspace found exits 1 saying where it looked.
A command that writes creates the workspace it was explicitly given when it is missing
(as before); a command that reads never does. ``gitkb init [DIR]`` creates one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from gitkb.core.config import CONFIG_FILE, DEFAULT_HOME
from gitkb.core.errors import NotFound

# Commands that only read (by their path under ``gitkb``): with no workspace they create nothing.
# Every other command may write, and creates a workspace named by --home/GITKB_HOME when missing.
READ_COMMANDS = frozenset(
    {
        "search",
        "ask",
        "status",
        "index list",
        "index stats",
        "docs list",
        "docs get",
        "jobs list",
        "jobs get",
        "jobs wait",
        "kb list",
        "agent show",
        "agent usage",
        "embeddings status",
        "cite check",
        "source list",
        "proposals list",
        "proposals show",
        "review list",
        "review show",
        "pr list",
        "backup",
    }
)
INIT_HINT = "create one with `gitkb init` (./.gitkb), or name one with --home DIR or GITKB_HOME"


def is_workspace(path: Path) -> bool:
    """A directory gitkb has opened before (its SQLite catalog, or the keyword index every workspace
    keeps, whichever engine holds its catalog) or been configured in (gitkb.toml)."""
    markers = (path / "catalog.sqlite3").exists() or (path / "keywords").is_dir()
    return path.is_dir() and (markers or (path / CONFIG_FILE).is_file())


def _ceilings(env: Mapping[str, str]) -> set[Path]:
    raw = env.get("GITKB_CEILING_DIRECTORIES", "")
    return {Path(p).expanduser().absolute() for p in raw.split(os.pathsep) if p.strip()}


def discover(start: Path, env: Mapping[str, str]) -> tuple[Path | None, list[Path]]:
    """The nearest ``.gitkb`` directory at or above ``start``, and every directory looked in."""
    looked: list[Path] = []
    ceilings = _ceilings(env)
    here = start.absolute()
    while True:
        looked.append(here)
        candidate = here / DEFAULT_HOME
        if candidate.is_dir():
            return candidate, looked
        if here.parent == here or here.parent in ceilings:
            return None, looked
        here = here.parent


def _where(looked: list[Path]) -> str:
    if len(looked) <= 4:
        return ", ".join(str(p) for p in looked)
    return f"{looked[0]}, {looked[1]}, ... {looked[-1]} ({len(looked)} directories)"


def choose_home(given: str | None, source: str, *, writes: bool, env: Mapping[str, str], cwd: Path) -> Path:
    """The workspace directory a command means; ``source`` says where ``given`` came from
    (``--home`` or ``GITKB_HOME``). Raises ``NotFound`` (exit 1) when there is none to use."""
    if given:
        home = Path(given).expanduser().absolute()
        if writes or is_workspace(home):
            return home
        raise NotFound(
            f"no gitkb workspace at {home} (from {source}); nothing was created",
            next_steps=[f"create it with `gitkb --home {home} init`", "or check the path"],
        )
    found, looked = discover(cwd, env)
    if found is not None:
        return found
    what = "a command that writes needs one" if writes else "nothing was created"
    raise NotFound(
        f"no gitkb workspace found: looked for {DEFAULT_HOME}/ in {_where(looked)}; {what}",
        next_steps=[INIT_HINT],
    )


def crash_log_dir(resolved: Path | None, env: Mapping[str, str]) -> Path:
    """Where an unexpected error's traceback goes: the command's workspace when it is a directory,
    else ``GITKB_HOME`` when it is one, else a per-user temporary directory (never a new ``./.gitkb``,
    which discovery would later take for a workspace)."""
    given = env.get("GITKB_HOME")
    for home in (resolved, Path(given).expanduser() if given else None):
        if home is not None and home.is_dir():
            return home / "logs"
    return Path(tempfile.gettempdir()) / f"gitkb-{os.getuid()}" / "logs"
