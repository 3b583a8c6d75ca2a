"""The CLI as ``gitkb`` runs it, on a home with the hashing embedder (no model to load)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner


def cli_runner(home: Path) -> Callable[..., str]:
    """``run(*args)``: ``gitkb ARGS`` on ``home``; asserts exit 0 and returns the output."""
    from gitkb.cli.main import cli  # the CLI entry, as `gitkb` runs it

    env = {
        "GITKB_HOME": str(home),
        "GITKB_EMBEDDING_PROVIDER": "hashing",
        "GITKB_EMBEDDING_MODEL": "hashing-384",
    }
    runner = CliRunner()

    def run(*args: str) -> str:
        res = runner.invoke(cli, list(args), env=env, catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.output

    return run
