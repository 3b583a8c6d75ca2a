"""Plain helpers for the tests (fixtures are in tests/conftest.py). pytest puts tests/ on the
path (rootdir conftest, ``prepend`` import mode), so a test module writes ``from helpers import ok``."""

from helpers.cli import cli_runner
from helpers.http_shape import error_code, error_message
from helpers.results import fails, ok
from helpers.sources import SOURCE, Upstream, bare_repo, git, with_roots
from helpers.wait import WaitTimeout, wait_until
from helpers.webhooks import github_push

__all__ = [
    "SOURCE",
    "Upstream",
    "WaitTimeout",
    "bare_repo",
    "cli_runner",
    "error_code",
    "error_message",
    "fails",
    "git",
    "github_push",
    "ok",
    "wait_until",
    "with_roots",
]
