"""The one error tree of gitkb.

Every domain failure is a ``GitkbError`` subclass with a stable ``code``.
Interfaces map the code once: the action API returns ``{"Success": False,
"Error": message, "code": code}``, HTTP maps it to a status
(``gitkb.http.errors.STATUS_BY_CODE``), the CLI prints one line and exits 1
(3 for ``internal``, with the crash log's path: ``write_crash_log``).

Codes (stable, part of the public contract):

============================  ==================================================
code                          meaning
============================  ==================================================
``invalid_argument``          bad input; nothing was written
``unauthorized``              missing or wrong credentials
``forbidden``                 credentials lack the scope, or binding refuses
``not_found``                 unknown index, document, job, source, review ...
``conflict``                  duplicate name, write during a rebuild, stale lease
``busy``                      the writer is busy with a job that excludes this one
``cancelled``                 the job was cancelled (``cancel_job``) before it finished
``managed_repo_guard``        a write to a git-managed index/repo outside proposals
``review_denied``             the review was denied
``too_large``                 a text or file over the size cap; nothing was written
``validation``                a document (sidecar, schema) failed validation
``embedding_not_configured``  no complete embedding identity resolves
``store_unavailable``         the catalog or vector store cannot be reached
``lease_lost``                this process lost the writer lease; its write was rolled back
``forge_error``               the forge (GitHub, GitLab) refused or failed
``internal``                  a bug; the message says where the log is
============================  ==================================================
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Any

from gitkb.core.files import append_log


class GitkbError(Exception):
    code = "internal"

    def __init__(
        self,
        message: str,
        *,
        next_steps: list[str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.next_steps = list(next_steps or [])
        self.details = dict(details or {})

    def to_response(self) -> dict[str, Any]:
        """The action-API failure shape."""
        out: dict[str, Any] = {"Success": False, "Error": self.message, "code": self.code}
        if self.next_steps:
            out["next_steps"] = self.next_steps
        out.update({k: v for k, v in self.details.items() if k not in out})
        return out


class InvalidArgument(GitkbError):
    code = "invalid_argument"


class Unauthorized(GitkbError):
    code = "unauthorized"


class Forbidden(GitkbError):
    code = "forbidden"


class NotFound(GitkbError):
    code = "not_found"


class Conflict(GitkbError):
    code = "conflict"


class Busy(GitkbError):
    code = "busy"


class Cancelled(GitkbError):
    code = "cancelled"


class ManagedRepoGuard(GitkbError):
    code = "managed_repo_guard"

    def __init__(self, message: str, **kw: Any) -> None:
        kw.setdefault(
            "next_steps",
            [
                "Use propose_kb_edit to stage the change on the source's proposal branch",
                "then open_kb_pull_request to send it for review",
            ],
        )
        details = dict(kw.pop("details", None) or {})
        details.setdefault("managed_document_repo", True)
        super().__init__(message, details=details, **kw)


class ReviewDenied(GitkbError):
    code = "review_denied"


class TooLarge(GitkbError):
    code = "too_large"


class ValidationFailed(GitkbError):
    code = "validation"


class EmbeddingNotConfigured(GitkbError):
    code = "embedding_not_configured"


class StoreUnavailable(GitkbError):
    code = "store_unavailable"


class ForgeError(GitkbError):
    code = "forge_error"


class LeaseLost(GitkbError):
    """A write of a writer whose lease another node took over (``stores.node_lease``): rolled back,
    nothing of it was written; the new writer runs the job."""

    code = "lease_lost"

    def __init__(self, message: str, **kw: Any) -> None:
        kw.setdefault(
            "next_steps", ["the node now holding the writer lease runs the job: poll it with get_job_result"]
        )
        super().__init__(message, **kw)


ALL_ERRORS: tuple[type[GitkbError], ...] = (
    GitkbError,
    InvalidArgument,
    Unauthorized,
    Forbidden,
    NotFound,
    Conflict,
    Busy,
    Cancelled,
    ManagedRepoGuard,
    ReviewDenied,
    TooLarge,
    ValidationFailed,
    EmbeddingNotConfigured,
    StoreUnavailable,
    ForgeError,
    LeaseLost,
)


def write_crash_log(home: str | os.PathLike[str], what: BaseException | str) -> Path | None:
    """The one writer of the crash log, ``<home>/logs/gitkb.log`` (0700 directory, 0600 file):
    appends ``what``'s traceback (or a log line) for every interface (Workspace tools, MCP, HTTP,
    CLI). Returns the log's path, or None when it cannot be written (a read-only home); never raises."""
    text = what if isinstance(what, str) else "".join(traceback.format_exception(what))
    try:
        return append_log(home, text if text.endswith("\n") else text + "\n")
    except (OSError, ValueError):
        return None
