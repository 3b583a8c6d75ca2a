"""Run the git CLI for the few things libgit2 cannot do (leased pushes, hook-checked ref moves)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gitkb.core.errors import GitkbError, StoreUnavailable
from gitkb.stores.git_auth import redact

# Variables a parent git process (e.g. when gitkb runs inside a hook) may leak into ours.
_SCRUB = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_QUARANTINE_PATH",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GITKB_WRITER_TOKEN",
    "GITKB_GIT_PASSWORD",
    "GITKB_GIT_USERNAME",
)


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: str
    stderr: str


def git_env(git_dir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update({"GIT_DIR": str(git_dir), "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANGUAGE": "C"})
    env.update(extra or {})
    return env


def run_git(
    git_dir: Path,
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    secrets: Iterable[str | None] = (),
    timeout: float = 120.0,
    check: bool = True,
    error: type[GitkbError] = StoreUnavailable,
) -> GitResult:
    """Run ``git <args>`` against ``git_dir``; stdout/stderr come back redacted."""
    secrets = list(secrets)
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=git_dir,
            env=git_env(git_dir, env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise error(f"git {args[0]} timed out after {timeout:.0f}s") from None
    except OSError as exc:
        raise StoreUnavailable(f"cannot run git: {exc.strerror}") from None
    result = GitResult(proc.returncode, redact(proc.stdout, secrets), redact(proc.stderr, secrets))
    if check and proc.returncode != 0:
        raise error(f"git {args[0]} failed: {last_lines(result.stderr)}")
    return result


def last_lines(text: str, n: int = 4) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:]) or "(no output)"
